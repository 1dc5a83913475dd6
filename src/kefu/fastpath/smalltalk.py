"""Smalltalk: recognise a message that is nothing but a greeting, thanks, goodbye…, and answer it.

A greeting that opens a question ("hi, where is my refund?") is not smalltalk:
answering "Hello!" to it would ignore the question. So the detector consumes
the message phrase by phrase from the start (greetings, thanks, fillers such as
"there" or 啊) and calls it smalltalk only when nothing is left over.

The phrases, fillers and replies are each language pack's ``smalltalk.toml``
(``kefu.text.packs``): the phrases and fillers of every pack are joined, and a reply
is its language's pack's (English's where a language has none).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from kefu.text import packs
from kefu.text.message import Message, as_message
from kefu.text.normalize import normalize

SMALLTALK_CONFIDENCE = 0.9
KINDS = ("greeting", "how_are_you", "who_are_you", "thanks", "goodbye", "ack")

# When one message holds several kinds, the reply answers the most telling one:
# "hi, who are you?" wants the introduction, "thanks, bye" the farewell.
_PRECEDENCE = ("who_are_you", "how_are_you", "goodbye", "thanks", "greeting", "ack")

# The order the kinds' phrases are tried in at a point of the message: the first that
# matches is taken, so a longer phrase of one kind goes before a shorter one of another
# ("great help" is thanks before "great" is an ack).
_MATCH_ORDER = ("how_are_you", "who_are_you", "greeting", "thanks", "goodbye", "ack")
# A filler is never the start of a longer Latin word, in whichever pack it is.
_FILLER_END = r"(?![a-z])"
# The language whose replies answer where a language has none.
_FALLBACK = "en"


def _phrases(data: dict[str, Any]) -> dict[str, list[str]]:
    """A pack's phrases per kind, each followed by its pack's word end."""
    phrases: dict[str, list[str]] = data.get("phrases", {})
    unknown = set(phrases) - set(KINDS)
    if unknown:
        raise ValueError(f"smalltalk.toml: unknown kinds {sorted(unknown)}; expected {KINDS}")
    end = data.get("word_end", "")
    return {kind: [f"(?:{p}){end}" for p in found] for kind, found in phrases.items()}


def _compile() -> re.Pattern[str]:
    """One alternative per kind, named after it (its phrases in every pack, one after
    another), then the fillers of every pack."""
    each = [_phrases(data) for data in packs.read("smalltalk")]
    parts = []
    for kind in _MATCH_ORDER:
        phrases = [p for phrases in each for p in phrases.get(kind, [])]
        if phrases:
            parts.append(f"(?P<{kind}>{'|'.join(phrases)})")
    fillers = "|".join(f"(?:{p})" for p in packs.joined("smalltalk", "fillers"))
    parts.append(f"(?P<filler>(?:{fillers or '(?!)'}){_FILLER_END})")
    return re.compile("|".join(parts))


_PHRASE = _compile()
_SEPARATORS = re.compile(r"[\W_]+")


def smalltalk_kind(
    message: str | Message, shop_name: str | None = None
) -> tuple[float, str | None]:
    """(confidence, kind) when the whole message is smalltalk, else (0.0, None).

    kind is one of ``KINDS``. A message made only of filler words is not smalltalk.
    ``shop_name`` (``--shop-name``: "Acme|艾克美") is filler too: "thanks Acme!".
    """
    text = as_message(message).lower
    for name in _names(shop_name):
        text = text.replace(name, " ")
    found: set[str] = set()
    pos = 0
    while True:
        gap = _SEPARATORS.match(text, pos)
        if gap is not None:
            pos = gap.end()
        if pos >= len(text):
            break
        match = _PHRASE.match(text, pos)
        if match is None or match.end() == pos:
            return 0.0, None
        group = match.lastgroup
        if group is not None and group != "filler":
            found.add(group)
        pos = match.end()
    for kind in _PRECEDENCE:
        if kind in found:
            return SMALLTALK_CONFIDENCE, kind
    return 0.0, None


@lru_cache(maxsize=8)
def _names(shop_name: str | None) -> tuple[str, ...]:
    """The shop's names as a message reads them (folded, case folded), longest first."""
    names = {normalize(name) for name in (shop_name or "").split("|")} - {""}
    return tuple(sorted(names, key=len, reverse=True))


def shop_names(value: str | None) -> tuple[str, str]:
    """The shop's name in English and in Chinese from ``--shop-name`` ("Acme", or
    "Acme|艾克美" for a Chinese name of its own); empty when it has none."""
    english, _, chinese = (value or "").partition("|")
    return english.strip(), (chinese or english).strip()


def smalltalk_reply(
    kind: str,
    lang: str,
    *,
    shop_name: str | None = None,
    order_example: str | None = None,
) -> str:
    """The templated reply to a smalltalk kind in ``lang`` (its pack's; English where it
    has none), naming the shop (``shop_name`` as ``--shop-name`` gives it) and showing
    ``order_example`` as the shape of an order number."""
    if kind not in KINDS:
        raise ValueError(f"unknown smalltalk kind {kind!r}; expected one of {KINDS}")
    pack = packs.of("smalltalk", lang)
    if kind not in pack.get("replies", {}):
        pack = packs.of("smalltalk", _FALLBACK)
    english, own = shop_names(shop_name)
    name = own if pack.get("second_name") else english
    # Each field is filled in before the reply is: the shop's name and the order example
    # are values, never read as templates, whatever braces they hold.
    fields = {
        key: template.format(name=name)
        for key, template in pack.get("named" if name else "unnamed", {}).items()
    }
    clause = pack.get("orders", {}).get("clause", "")
    fields["orders"] = clause.format(example=order_example) if order_example else ""
    return str(pack["replies"][kind].format_map(fields))
