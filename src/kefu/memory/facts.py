"""Facts a customer-service agent must not lose, read from the customer's words by code.

Only what a pattern knows for sure is taken (the order-number reader, sizes, e-mail
addresses, the language), plus the customer's opening message verbatim: it usually
states the problem, and a small model's summary is not trusted to keep it. Each kind
keeps its values in first-seen order, at most ``MAX_VALUES`` (the latest win).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kefu.engine.base import ChatMessage
from kefu.text.order_numbers import read_order_number
from kefu.text.words import language

MAX_VALUES = 5
OPENING_CHARS = 200

SIZE = re.compile(
    r"\bsize\s*(?:is\s*|:\s*)?((?:x{0,3}[sl]|m|\d{1,2}(?:\.5)?)(?:/\d{1,2})?)\b"
    r"|(?:尺码|码数)\s*(?:是)?\s*([A-Za-z0-9.]{1,4})",
    re.IGNORECASE,
)
# Every repeat is bounded (RFC 5321: a local part of at most 64 characters; DNS: labels of
# at most 63), so an attempt looks at most a few hundred characters past where it starts
# and a message costs time linear in its length. Unbounded, the attempts at every word
# boundary of a 100k-char "a.a.a…" each ran to its end: 25 s.
EMAIL = re.compile(r"\b[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}\b")
# Clauses: an order number is read per clause, so every one a message names is kept.
# A separator is tried only where its run of punctuation or of spaces begins (the
# lookbehinds; the first leaves the newline out, as a separator before may end in one).
# Tried at every character of a run, 100k spaces take a minute; the splits are the same.
_CLAUSE = re.compile(
    r"(?<![,;.!?，。；！？、])[,;.!?\n，。；！？、]+(?:\s+|$)|(?<!\s)\s+(?:and|or)\s+"
)

Facts = dict[str, list[str]]


def merge_facts(
    known: Mapping[str, list[str]],
    messages: Iterable[ChatMessage],
    *,
    order_pattern: str | None,
    order_example: str | None,
) -> Facts:
    """``known`` plus what the customer's messages among ``messages`` state."""
    facts: Facts = {kind: list(values) for kind, values in known.items()}
    for message in messages:
        if message.role != "user" or not message.content.strip():
            continue
        text = message.content
        if "opening" not in facts:
            facts["opening"] = [text.strip()[:OPENING_CHARS]]
        _add(facts, "language", language(text), keep=1)
        for clause in _CLAUSE.split(text):
            order = read_order_number(clause, order_pattern, order_example)
            if order.id is not None:
                _add(facts, "order_numbers", order.id)
        for match in SIZE.finditer(text):
            _add(facts, "sizes", (match[1] or match[2]).upper())
        for email in EMAIL.findall(text):
            _add(facts, "emails", email)
    return facts


def _add(facts: Facts, kind: str, value: str, *, keep: int = MAX_VALUES) -> None:
    values = facts.setdefault(kind, [])
    if value in values:
        values.remove(value)  # seen again: it is the latest
    values.append(value)
    del values[:-keep]
