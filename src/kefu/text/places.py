"""The place-name gazetteer of the answer cache's entity guard.

Shipping, prices, taxes and opening hours differ by place, and an embedding
puts "deliver to Singapore" and "deliver to Malaysia" closer together than most
paraphrases, so place names are compared by name, never by vector. Each place
has one canonical key (English, lower case) and its names in every language pack
(``kefu.text.packs``: each pack's ``places.toml``), so "Singapore" and "新加坡" agree
across languages. As in ``lexicon.py``, a pack's ``[words]`` names are whole words of
Latin-script text and its ``[characters]`` names are found inside a run of Chinese
characters.
"""

from __future__ import annotations

from kefu.text import packs

_WORD_NAMES: dict[str, list[str]] = packs.merged("places", "words")
_CHARACTER_NAMES: dict[str, list[str]] = packs.merged("places", "characters")

# Short names that are also common words or other abbreviations when written in
# lower case: matched only in capitals.
UPPERCASE_ONLY = frozenset(packs.joined("places", "uppercase_only"))

ENGLISH: dict[tuple[str, ...], str] = {
    tuple(name.split()): key for key, names in _WORD_NAMES.items() for name in names
}
"""Lower-case name as a tuple of words -> canonical key."""

CHINESE: dict[str, str] = {name: key for key, names in _CHARACTER_NAMES.items() for name in names}
"""Name found inside Chinese characters -> canonical key."""

CHINESE_NAMES: dict[str, tuple[str, ...]] = {
    key: tuple(names) for key, names in _CHARACTER_NAMES.items()
}
"""Canonical key -> its names found inside Chinese characters."""

LONGEST_ENGLISH = max(len(words) for words in ENGLISH)
# Longest first, so 印度尼西亚 is Indonesia rather than 印度 (India) plus leftovers.
CHINESE_BY_LENGTH = tuple(sorted(CHINESE, key=len, reverse=True))
