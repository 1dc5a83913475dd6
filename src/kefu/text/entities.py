"""The entities of a text: numbers, ids, places, names, negations, contrasts, and the
frame of its content words; what the answer cache's guard (``cache/guard.py``) and the
FAQ guard compare, and what marks a message as the customer's own data.

Each entity is in a canonical form, so languages can agree (新加坡 is Singapore).
``Salient.personal`` marks what only the asking customer can know about (order and
tracking numbers, emails, phone numbers, links): such a question is never cached.
Kept below ``cache`` and ``knowledge``, which both read it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kefu.text import lexicon, places
from kefu.text.frame import frame_of_normal
from kefu.text.normalize import fold, normalize_folded

T = TypeVar("T")

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
# Anchored at a run's start: unanchored, a long run without "@" was rescanned from each
# of its positions (quadratic: 8 000 letters took 0.3 s).
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_DATE = re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)")
_PHONE = re.compile(r"(?<![\w.,:/-])\+?\d[\d ()-]{5,}\d(?![\w.,:/-])")
_RUN = re.compile(r"[^\W_]+(?:'[^\W_]+)*(?:[-.,:/][^\W_]+(?:'[^\W_]+)*)*")
_NUMERIC = re.compile(r"\d+(?:[.,:/]\d+)*")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_WITH_UNIT = re.compile(r"(\d+(?:\.\d+)?)([a-z]+)")
_SENTENCE_END = re.compile(r"[.!?。！？\n]")
_ZH_NUMBER = re.compile(
    "([零〇一二两三四五六七八九十百千万]+)(?=" + "|".join(lexicon.ZH_CLASSIFIERS) + ")"
)
_METRES = re.compile(r"(\d+)米(\d)(?![\d.])")
_ZH_WEEKDAY = re.compile("(?:周|星期|礼拜)([一二三四五六日天末])")
_ZH_A_NOT_A = re.compile(f"([{_CJK}])[不没]\\1")  # 能不能, 有没有: a question, not a negation
_PERSONAL_ID_DIGITS = 5  # AC-100234 is an order; PS5, S23 and covid-19 are not
_PERSONAL_NUMBER_DIGITS = 6  # a bare 100234 is an order or account number
_PHONE_DIGITS = 7


@dataclass(frozen=True, slots=True)
class Salient:
    """The entities of one message, each in a canonical form so languages can agree."""

    numbers: frozenset[str] = frozenset()
    ids: frozenset[str] = frozenset()
    places: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    negations: int = 0
    contrasts: frozenset[tuple[str, str]] = frozenset()  # (group, the alternative named)
    personal: frozenset[str] = frozenset()  # the subset of ids that is the user's own data
    words: frozenset[str] = field(default=frozenset(), repr=False)  # every Latin word, lower
    frame: tuple[str, ...] = field(default=(), repr=False)  # content tokens, for minimal pairs


def salient(text: str) -> Salient:
    """The entities of a text (a customer's message is read once, as a ``Message``)."""
    folded = fold(text)
    return read_entities(folded, frame_of_normal(normalize_folded(folded)))


def read_entities(folded: str, content: tuple[str, ...]) -> Salient:
    """The entities of a ``fold``-ed text whose frame is ``content``."""
    found = _Found()
    found.frame = content
    text = folded
    for pattern in (_EMAIL, _URL):
        for match in pattern.finditer(text):
            found.ids.add(match.group().lower().rstrip(".,!?)"))
            found.personal.add(match.group().lower().rstrip(".,!?)"))
        text = pattern.sub(" ", text)
    for match in _DATE.finditer(text):
        found.numbers.update(_canonical_number(part) for part in match.groups())
    text = _DATE.sub(" ", text)
    for match in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if len(digits) >= _PHONE_DIGITS:
            found.ids.add(digits)
            found.personal.add(digits)
            text = text.replace(match.group(), " ")
    text = _METRES.sub(r"\1.\2米", text)  # 1米5 is 1.5米
    zh = _CJK_RUN.search(text) is not None
    _latin(_CJK_RUN.sub(" ", text), found, zh=zh)
    for run in _CJK_RUN.findall(text):
        _chinese(run, found)
    return found.freeze()


class _Found:
    def __init__(self) -> None:
        self.numbers: set[str] = set()
        self.ids: set[str] = set()
        self.places: set[str] = set()
        self.names: set[str] = set()
        self.negations = 0
        self.contrasts: set[tuple[str, str]] = set()
        self.personal: set[str] = set()
        self.words: set[str] = set()
        self.frame: tuple[str, ...] = ()

    def freeze(self) -> Salient:
        return Salient(
            numbers=_frozen(self.numbers),
            ids=_frozen(self.ids),
            places=_frozen(self.places),
            names=_frozen(self.names),
            negations=self.negations,
            contrasts=_frozen(self.contrasts),
            personal=_frozen(self.personal),
            words=frozenset(sys.intern(word) for word in self.words),
            frame=self.frame,
        )


# A cached answer keeps its question's entities for as long as it lives (10 000 by
# default): each empty frozenset was 216 bytes of its own, and each word a string of its
# own, about 2.5 KB of an answer's 5 KB (tracemalloc, 2 000 answers). Most sets are empty
# and the words repeat, so one empty set and one string per word serve them all.
_EMPTY: frozenset[Any] = frozenset()


def _frozen(items: set[T]) -> frozenset[T]:
    return frozenset(items) if items else _EMPTY


def _canonical_number(text: str) -> str:
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    if not _DECIMAL.fullmatch(text):
        return text  # 14:00, 24/7
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return (whole.lstrip("0") or "0") + ("." + fraction if fraction else "")


def _part_kind(part: str) -> str:
    if _NUMERIC.fullmatch(part):
        return "number"
    if not any(c.isdigit() for c in part):
        return "word"
    unit = _WITH_UNIT.fullmatch(part.lower())
    return "unit" if unit and unit.group(2) in lexicon.UNIT_SUFFIXES else "id"


def _latin(text: str, found: _Found, *, zh: bool) -> None:
    """Latin-script words: ids, numbers, places, names, negations, contrasts."""
    words: list[tuple[str, bool]] = []  # (as written, starts a sentence)
    previous_end = 0
    for match in _RUN.finditer(text):
        initial = not words or _SENTENCE_END.search(text, previous_end, match.start()) is not None
        previous_end = match.end()
        run = match.group()
        parts = run.split("-")
        kinds = [_part_kind(part) for part in parts]
        if "id" in kinds or (kinds[0] == "word" and "number" in kinds):
            found.ids.add(run.lower())  # AC-100234, A12, covid-19
            if sum(c.isdigit() for c in run) >= _PERSONAL_ID_DIGITS:
                found.personal.add(run.lower())
            continue
        for part, kind in zip(parts, kinds, strict=True):
            if kind == "number" and part.isdigit() and len(part) >= _PERSONAL_NUMBER_DIGITS:
                found.ids.add(part)
                found.personal.add(part)
            elif kind == "number":
                found.numbers.add(_canonical_number(part))
            elif kind == "unit":
                unit = _WITH_UNIT.fullmatch(part.lower())
                assert unit is not None
                found.numbers.add(_canonical_number(unit.group(1)))
            else:
                for word in re.split(r"[.,:/]", part):
                    words.append((word, initial))
                    initial = False
    _words(words, found, zh=zh)


def _words(words: list[tuple[str, bool]], found: _Found, *, zh: bool) -> None:
    lower = [word.lower() for word, _ in words]
    found.words.update(lower)
    letters = [c for word, _ in words for c in word if c.isalpha()]
    shouting = len(letters) >= 6 and sum(c.isupper() for c in letters) > 0.6 * len(letters)
    taken = [False] * len(words)
    for i in range(len(words)):  # places, longest name first
        for n in range(min(places.LONGEST_ENGLISH, len(words) - i), 0, -1):
            key = places.ENGLISH.get(tuple(lower[i : i + n]))
            if key is None or any(taken[i : i + n]):
                continue
            if n == 1 and lower[i] in places.UPPERCASE_ONLY and not words[i][0].isupper():
                continue
            found.places.add(key)
            taken[i : i + n] = [True] * n
            break
    for i, ((word, initial), low) in enumerate(zip(words, lower, strict=True)):
        if low in lexicon.NEGATIONS_EN or low.endswith("n't"):
            found.negations += 1
        elif low in lexicon.NUMBER_WORDS_EN:
            found.numbers.add(str(lexicon.NUMBER_WORDS_EN[low]))
        elif low in lexicon.WEEKDAYS_EN or low.removesuffix("s") in lexicon.WEEKDAYS_EN:
            found.names.add(lexicon.WEEKDAYS_EN[low.removesuffix("s")])
        elif not taken[i] and _is_name(word, initial, zh=zh, shouting=shouting):
            found.names.add(low)
    present = set(lower)
    for index, group in enumerate(lexicon.CONTRASTS_EN):
        for label, forms in group:
            if forms & present:
                found.contrasts.add((f"en{index}", label))


def _is_name(word: str, initial: bool, *, zh: bool, shouting: bool) -> bool:
    low = word.lower()
    if low in lexicon.NOT_NAMES or not word[:1].isalpha():
        return False
    if zh:  # Latin words inside Chinese text are brands, models and abbreviations
        return len(word) >= 2
    if shouting or not word[0].isupper():
        return False
    if any(c.isupper() for c in word[1:]):
        return True  # iPhone, PayPal, VIP
    return not initial or low not in lexicon.SENTENCE_STARTERS


def _chinese(run: str, found: _Found) -> None:
    """One run of Chinese characters: places, weekdays, quantities, negations, contrasts."""
    for name in places.CHINESE_BY_LENGTH:
        if name in run:
            found.places.add(places.CHINESE[name])
            run = run.replace(name, "|")
    for brand in lexicon.ZH_BRANDS:
        if brand in run:
            found.names.add(brand)
            run = run.replace(brand, "|")
    for match in _ZH_WEEKDAY.finditer(run):
        found.names.add(lexicon.WEEKDAYS_ZH[match.group(1)])
    run = _ZH_WEEKDAY.sub("|", run)
    for match in _ZH_NUMBER.finditer(run):
        value = _zh_number(match.group(1))
        if value is not None and value != 1:  # 一个, 一款, 一层: "a", like English "a"
            found.numbers.add(str(value))
    for index, group in enumerate(lexicon.CONTRASTS_ZH):
        for alternative in group:
            if any(form in run for form in alternative):
                found.contrasts.add((f"zh{index}", alternative[0]))
    for word in lexicon.NOT_NEGATIONS_ZH:
        run = run.replace(word, "|")
    run = _ZH_A_NOT_A.sub("|", run)
    for cue in lexicon.NEGATIONS_ZH:
        found.negations += run.count(cue)
        run = run.replace(cue, "|")


def _zh_number(text: str) -> int | None:
    """两 -> 2, 十五 -> 15, 三百二十 -> 320, 一万 -> 10000; None for what is not a number."""
    total = section = digit = 0
    for char in text:
        if char in lexicon.ZH_DIGITS:
            digit = lexicon.ZH_DIGITS[char]
        elif char == "万":
            total += (section + digit) * 10_000
            section = digit = 0
        else:
            section += (digit or 1) * lexicon.ZH_MULTIPLIERS[char]
            digit = 0
    value = total + section + digit
    return value if value or text in ("零", "\u3007") else None
