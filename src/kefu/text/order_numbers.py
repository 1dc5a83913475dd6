"""Order numbers in a customer's message: whole, closed up, or mistyped.

An order number is what ``--order-pattern`` finds (``AC-100234``); without a pattern a
message has none. Customers also type
the shop's letters and digits in shapes the pattern does not take: with a space
("AC 100234"), which is still their order, or with a digit too few ("AC-10023"), which
the reply should name rather than ask for a number they just gave. Such a token has
the letters of ``--order-example`` and nearly as many digits; an example without two
letters in front of its digits (``12345678``, ``ORD-2024-0001``) gives nothing to look
for, since bare digits are prices, postcodes and phone numbers as often as orders.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from kefu.text.normalize import fold
from kefu.text.words import space_scripts

_PREFIX_NUMBER = re.compile(r"([A-Z]+)[-\s]?(\d+)")


@lru_cache(maxsize=16)
def _order_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def example_fits(example: str, pattern: str) -> bool:
    """Whether the pattern takes the whole example (not a number inside a sentence)."""
    return _order_regex(pattern).fullmatch(example.strip()) is not None


@dataclass(frozen=True, slots=True)
class OrderFormat:
    """What an order number looks like: ``--order-pattern`` and ``--order-example``."""

    pattern: str | None = None  # none: the shop reads no order numbers
    example: str | None = None  # what the replies show as the shape to look for


class OrderNumber(NamedTuple):
    """What a message says of its order: the number, or else one mistyped."""

    id: str | None  # canonical (AC-100234)
    mistyped: str | None = None  # upper-cased as typed ("AC-10023"), when there is no id


def read_order_number(message: str, pattern: str | None, example: str | None = None) -> OrderNumber:
    """The first order number in the message, in its canonical form (``AC-100234``).

    Canonical: upper case; and when the pattern spells a hyphen (``AC-?``) the
    hyphen is put back between the letters and the digits, so "ac100234",
    "AC-100234" and its full-width twin are one order. Other shapes are only
    upper-cased. With ``example``, a token of its shape that the pattern does not take
    is the order when closing it up makes it one ("AC 100234"), and mistyped otherwise
    ("AC-10023": no number closes it up).
    """
    return order_number_of_spaced(space_scripts(fold(message)), pattern, example)


def order_number_of_spaced(
    text: str, pattern: str | None, example: str | None = None
) -> OrderNumber:
    """``read_order_number`` of a ``fold``-ed text with its scripts spaced."""
    if pattern is None:
        return OrderNumber(None)
    match = _order_regex(pattern).search(text)
    if match is not None:
        return OrderNumber(_canonical(match.group().strip().upper(), pattern))
    mistyped = None
    for typed, forms in _order_like(text, example):
        for form in forms:
            if example_fits(form, pattern):
                return OrderNumber(_canonical(form, pattern))
        mistyped = mistyped or typed.upper()
    return OrderNumber(None, mistyped)


def _canonical(found: str, pattern: str) -> str:
    parts = _PREFIX_NUMBER.fullmatch(found)
    if parts is not None and "-" in pattern:
        return f"{parts[1]}-{parts[2]}"
    return found


def _order_like(text: str, example: str | None) -> Iterator[tuple[str, tuple[str, str]]]:
    """Each token shaped like the example (its letters, then at least all but two of
    its digits, three at least: "AC 5 stars" is no order), with its closed-up forms."""
    shape = _PREFIX_NUMBER.fullmatch(example.strip().upper()) if example else None
    if shape is None or len(shape[1]) < 2:  # one letter is as often an English word
        return
    letters = shape[1]
    for match in _order_like_regex(letters, max(3, len(shape[2]) - 2)).finditer(text):
        yield match[0], (f"{letters}-{match[1]}", f"{letters}{match[1]}")


@lru_cache(maxsize=16)
def _order_like_regex(letters: str, min_digits: int) -> re.Pattern[str]:
    return re.compile(
        rf"(?<![A-Za-z0-9]){re.escape(letters)}[-\s]?(\d{{{min_digits},}})(?![A-Za-z0-9])", re.I
    )
