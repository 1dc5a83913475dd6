"""A customer's message, read once: every reader of the fast path takes this.

``read_message`` normalises the text once (``normalize.fold``); the forms the readers
want (the normal form for exact matches, words, tokens, the frame, the entities, the order
number, the case-folded text the rules match) are derived from that on first use and
kept, so no reader normalises again and a rule's answer pays for no entity it skips.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from kefu.text.entities import Salient, read_entities
from kefu.text.frame import frame_of_normal
from kefu.text.normalize import fold, normalize_folded
from kefu.text.order_numbers import OrderFormat, OrderNumber, order_number_of_spaced
from kefu.text.words import (
    language,
    runs_of_normal,
    space_scripts,
    tokens_of_words,
    words_of_runs,
)

DEFAULT_ORDERS = OrderFormat()


@dataclass(frozen=True, eq=False)
class Message:
    """The analysis of one message. Immutable: the derived forms are computed from
    ``folded`` alone, once each (``cached_property``), whichever reader asks first."""

    raw: str  # as the customer sent it (kept, shown, stored)
    folded: str  # ``fold(raw)``: case kept, for names, shouting and patterns
    normal: str  # ``normalize``: case folded, edge punctuation off; exact matches, ids
    lang: str  # "zh" when it has any Chinese, else "en"
    orders: OrderFormat = field(default=DEFAULT_ORDERS, repr=False)

    @cached_property
    def lower(self) -> str:
        return self.folded.casefold()

    @cached_property
    def spaced(self) -> str:
        """``lower`` with a space where Chinese meets Latin: what the rules match."""
        return space_scripts(self.lower)

    @cached_property
    def runs(self) -> tuple[str, ...]:
        return tuple(runs_of_normal(self.normal))

    @cached_property
    def words(self) -> tuple[str, ...]:
        """Latin words (no "'s"), numbers and Chinese dictionary words (``words_of``)."""
        return tuple(words_of_runs(list(self.runs)))

    @cached_property
    def tokens(self) -> tuple[str, ...]:
        """Lexical tokens (``tokens``): what BM25 stems."""
        return tuple(tokens_of_words(list(self.runs)))

    @cached_property
    def frame(self) -> tuple[str, ...]:
        return frame_of_normal(self.normal)

    @cached_property
    def entities(self) -> Salient:
        return read_entities(self.folded, self.frame)

    @cached_property
    def order(self) -> OrderNumber:
        """The order number, or one mistyped, in ``orders``' shape."""
        return order_number_of_spaced(
            space_scripts(self.folded), self.orders.pattern, self.orders.example
        )


def read_message(raw: str, orders: OrderFormat = DEFAULT_ORDERS) -> Message:
    """Normalise the message (once) and name its language."""
    folded = fold(raw)
    return Message(raw, folded, normalize_folded(folded), language(folded), orders)


def as_message(text: str | Message) -> Message:
    """The message itself, or a text read as one (knowledge-base texts, probes, tests)."""
    return text if isinstance(text, Message) else read_message(text)
