"""Word lists of the entity guard: negation cues, number words, units, contrasts.

Read from every installed language pack's ``lexicon.toml`` (``kefu.text.packs``), so a
reviewer reads the rules in ``entities.py`` without scrolling through vocabulary, and a
language or a word is added without touching them. ``entities.py`` reads a text two
ways, and the names say which: ``_EN`` lists (a pack's ``[words]``) are whole words of
Latin-script text, in lower case; ``_ZH`` lists (its ``[characters]``) are found inside
a run of Chinese characters, which has no spaces to mark a word.
"""

from __future__ import annotations

from typing import Any

from kefu.text import packs


def _words(*keys: str) -> tuple[Any, ...]:
    return packs.joined("lexicon", "words", *keys)


def _characters(*keys: str) -> tuple[Any, ...]:
    return packs.joined("lexicon", "characters", *keys)


# --- negation -------------------------------------------------------------------------

NEGATIONS_EN = frozenset(_words("negations"))
NEGATIONS_ZH = _characters("negations")  # in order: the first found are counted first
NOT_NEGATIONS_ZH = _characters("not_negations")  # removed before counting

# --- numbers --------------------------------------------------------------------------

NUMBER_WORDS_EN: dict[str, int] = packs.merged("lexicon", "words", "number_words")
UNIT_SUFFIXES = frozenset(_words("unit_suffixes"))
ZH_DIGITS: dict[str, int] = packs.merged("lexicon", "characters", "numeral_digits")
ZH_MULTIPLIERS: dict[str, int] = packs.merged("lexicon", "characters", "numeral_multipliers")
ZH_CLASSIFIERS = _characters("classifiers")

# --- names ----------------------------------------------------------------------------

WEEKDAYS_EN: dict[str, str] = packs.merged("lexicon", "words", "weekdays")
WEEKDAYS_ZH: dict[str, str] = packs.merged("lexicon", "characters", "weekdays")
WEEKDAY_PREFIXES_ZH = _characters("weekday_prefixes")
SENTENCE_STARTERS = frozenset(_words("sentence_starters"))
NOT_NAMES = frozenset(_words("not_names"))
ZH_BRANDS = tuple(sorted(_characters("brands"), key=len, reverse=True))  # longest first

# --- contrasts ------------------------------------------------------------------------

# Groups of mutually exclusive alternatives; each alternative is (its label, its word
# forms), the label its first form.
CONTRASTS_EN: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = tuple(
    tuple((alt.split()[0], frozenset(alt.split())) for alt in group)
    for group in _words("contrasts")
)
# Each alternative is its forms, the first its label.
CONTRASTS_ZH: tuple[tuple[tuple[str, ...], ...], ...] = tuple(
    tuple(tuple(alt.split()) for alt in group) for group in _characters("contrasts")
)
