"""The intent router: which rule answers a message, decided without a model call.

Candidates come from the rule detectors (``rules.py``). A message no rule takes goes to
the knowledge base's decision (``kefu.faq``), and from there to the LLM ("general").
Two things skip the contest: an explicit request for a person (or a bot that failed
twice), and an order number — a structured id needs no score.

Decision, in order:

1. handoff at confidence 1.0 (asked for a human; the bot failed
   ``failures_to_handoff`` times in a row, counting this message) → handoff;
2. an order number in the message, or one mistyped ("AC-10023": the reply says
   so) → order_status, unless a handoff candidate reaches ``HANDOFF_OVER_ORDER``
   (a complaint or real anger about the order wants a person, not a status line);
3. otherwise, among the candidates that reach ``RULE_THRESHOLD``, the most confident
   wins if it leads the next such candidate by ``RULE_MARGIN``;
4. else general, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kefu.fastpath.rules import (
    ASKED_FOR_HUMAN,
    asks_about_order,
    handoff_score,
    is_failure_signal,
    is_follow_up,
    smalltalk_kind,
)
from kefu.knowledge.base import Hit
from kefu.text.message import Message, read_message
from kefu.text.order_numbers import OrderFormat

Intent = Literal["faq", "order_status", "handoff", "smalltalk", "general"]

# A rule candidate must reach this to win the contest. The detectors' scale:
# explicit request for a person 1.0, order number 1.0, smalltalk 0.9, complaint
# or manager 0.8, two signs of anger 0.8 (one strong sign 0.85), a question about
# an order without its number 0.75 — all pass; one mild sign of anger ("terrible",
# "!!") is 0.6 and does not, alone, take a customer away from an answer.
RULE_THRESHOLD = 0.7
# An order number wins over every candidate below this handoff confidence.
HANDOFF_OVER_ORDER = 0.8
ORDER_ID_CONFIDENCE = 1.0
ORDER_QUESTION_CONFIDENCE = 0.75
FAILED_REASON = "the bot failed twice"
MISTYPED_REASON = "the order number is mistyped"
# The lead the winning rule needs over the next: closer, the message is ambiguous.
RULE_MARGIN = 0.03

# Ties between equally confident candidates go to the first here.
_PRECEDENCE: tuple[Intent, ...] = ("handoff", "order_status", "smalltalk")


@dataclass(frozen=True, slots=True)
class Candidate:
    intent: Intent
    confidence: float
    # handoff: the reason; order_status: the order id; smalltalk: the kind; faq: the entry id.
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Routing:
    """The decision. For general, ``confidence`` and ``margin`` are those of the best
    candidate it declined (0.0 and 1.0 when there was none); for an order number or a
    handoff that won by precedence, margin is clamped at 0."""

    intent: Intent
    confidence: float
    margin: float
    candidates: tuple[Candidate, ...]  # best first
    order_id: str | None = None
    faq: Hit | None = None  # the KB hit to serve when intent == "faq"
    reason: str | None = None  # handoff reason, a mistyped order number, or why general


@dataclass(frozen=True, slots=True)
class RouterConfig:
    order_pattern: str | None = None  # none: no order numbers, no order_status
    order_example: str | None = None  # its letters find mistyped numbers
    failures_to_handoff: int = 2
    shop_name: str | None = None  # --shop-name: the shop's own name is filler in smalltalk

    @property
    def orders(self) -> OrderFormat:
        return OrderFormat(self.order_pattern, self.order_example)

    def read(self, message: str | Message) -> Message:
        """The message read with this configuration's order numbers."""
        if isinstance(message, Message) and message.orders == self.orders:
            return message
        text = message.raw if isinstance(message, Message) else message
        return read_message(text, self.orders)


@dataclass(frozen=True, slots=True)
class Rules:
    """What the rule detectors found in a message: read once, before any search, and
    reused when the search's hits join the contest."""

    order_id: str | None
    mistyped_order_id: str | None  # only when there is no order_id
    handoff: Candidate | None
    order: Candidate | None
    smalltalk: Candidate | None
    follow_up: bool  # "and the refund?": no FAQ answers it, nor a cached answer (is_follow_up)

    def candidates(self) -> list[Candidate]:
        return [c for c in (self.handoff, self.order, self.smalltalk) if c is not None]


def read_rules(message: str | Message, *, failures: int, config: RouterConfig) -> Rules:
    """``failures`` is the number of consecutive earlier turns that failed (tracked per
    session by the caller)."""
    message = config.read(message)
    order_id, mistyped = message.order
    failed = failures + is_failure_signal(message)
    handoff: Candidate | None = None
    if failed >= config.failures_to_handoff:
        failed_reason = FAILED_REASON if failed == 2 else f"the bot failed {failed} times"
        handoff = Candidate("handoff", 1.0, failed_reason)
    else:
        confidence, reason = handoff_score(message)  # 1.0 only for an explicit request
        if confidence > 0:
            handoff = Candidate("handoff", confidence, reason)
    order: Candidate | None = None
    if order_id is not None or mistyped is not None:
        order = Candidate("order_status", ORDER_ID_CONFIDENCE, order_id or mistyped)
    elif config.order_pattern is not None and asks_about_order(message):
        order = Candidate("order_status", ORDER_QUESTION_CONFIDENCE)
    small, kind = smalltalk_kind(message, config.shop_name)
    smalltalk = Candidate("smalltalk", small, kind) if small > 0 else None
    return Rules(order_id, mistyped, handoff, order, smalltalk, is_follow_up(message))


def route(message: str | Message, *, config: RouterConfig, rules: Rules) -> Routing:
    """Route one message by what ``read_rules`` found in it."""
    order_id, handoff, order = rules.order_id, rules.handoff, rules.order
    ranked = tuple(
        sorted(rules.candidates(), key=lambda c: (-c.confidence, _PRECEDENCE.index(c.intent)))
    )
    if handoff is not None and handoff.confidence >= 1.0:
        return _by_precedence(handoff, ranked, order_id, handoff.detail or ASKED_FOR_HUMAN)
    number_given = order_id is not None or rules.mistyped_order_id is not None
    if order is not None and number_given:
        if handoff is not None and handoff.confidence >= HANDOFF_OVER_ORDER:
            return _by_precedence(handoff, ranked, order_id, handoff.detail)
        mistyped = MISTYPED_REASON if order_id is None else None
        return _by_precedence(order, ranked, order_id, mistyped)
    if not ranked:
        return Routing("general", 0.0, 1.0, ranked, reason="no candidate")
    # Only candidates that reach the threshold compete: a sub-threshold one (one
    # "terrible" next to a clear question) is no rival interpretation.
    eligible = [c for c in ranked if c.confidence >= RULE_THRESHOLD]
    if not eligible:
        best = ranked[0]
        reason = f"{best.intent} {best.confidence:.2f} below threshold {RULE_THRESHOLD:.2f}"
        margin = best.confidence - ranked[1].confidence if len(ranked) > 1 else 1.0
        return Routing("general", best.confidence, margin, ranked, reason=reason)
    top = eligible[0]
    margin = top.confidence - eligible[1].confidence if len(eligible) > 1 else 1.0
    if margin < RULE_MARGIN:
        reason = f"{top.intent} margin {margin:.2f} over {eligible[1].intent} < {RULE_MARGIN:.2f}"
        return Routing("general", top.confidence, margin, ranked, reason=reason)
    winner_reason = top.detail if top.intent == "handoff" else None
    return Routing(top.intent, top.confidence, margin, ranked, reason=winner_reason)


def _by_precedence(
    winner: Candidate, ranked: tuple[Candidate, ...], order_id: str | None, reason: str | None
) -> Routing:
    others = [c.confidence for c in ranked if c is not winner]
    margin = max(0.0, winner.confidence - max(others)) if others else 1.0
    return Routing(winner.intent, winner.confidence, margin, ranked, order_id, reason=reason)
