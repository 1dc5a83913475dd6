"""The intent router: which tier answers a message, decided without a model call.

Candidates come from the rule detectors (``rules.py``) and from the knowledge
base's hits. A candidate is served only when it is both confident and clearly
ahead; otherwise the message goes to the LLM with the best passages in its
context ("general"), because a wrong canned answer costs more than a slower
right one. Two things skip the contest: an explicit request for a person (or a
bot that failed twice), and an order number — a structured id needs no score.

Decision, in order:

1. handoff at confidence 1.0 (asked for a human; the bot failed
   ``failures_to_handoff`` times in a row, counting this message) → handoff;
2. an order number in the message, or one mistyped ("LH-10023": the reply says
   so) → order_status, unless a handoff candidate reaches ``HANDOFF_OVER_ORDER``
   (a complaint or real anger about the order wants a person, not a status line);
3. otherwise, among the candidates that reach their own threshold
   (``config.faq_threshold``, or ``faq_threshold_zh`` for a message with Chinese, for
   faq; ``RULE_THRESHOLD`` for the rules), the most
   confident wins if it leads the next such candidate by ``config.faq_margin``;
   for faq, its answer's lead over the next answer must reach ``faq_margin`` too
   (two answers close together mean the question is ambiguous); an answer scores
   its best phrasing plus a share of its second (``_top_faq``); and a message that
   follows on from an earlier one ("and the refund?", 运费呢: ``is_follow_up``) is
   never faq, the conversation says what it asks;
4. else general, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from kefu.knowledge.entries import answer_key
from kefu.text.message import Message, read_message
from kefu.text.order_numbers import DEFAULT_ORDER_EXAMPLE, DEFAULT_ORDER_PATTERN, OrderFormat

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
FOLLOW_UP_REASON = "the message follows on from an earlier one"
MISTYPED_REASON = "the order number is mistyped"
# How much an answer's second-best phrasing adds to its score (``_top_faq``). Chosen on
# the dev and fresh splits of benchmarks/answer_quality.py with ``faq_margin``: 0.2 with a
# 0.03 margin cut false hits the most (9 to 7 of 472 rows) and lost no answer.
SECOND_PHRASING_WEIGHT = 0.2

# Ties between equally confident candidates go to the first here.
_PRECEDENCE: tuple[Intent, ...] = ("handoff", "order_status", "smalltalk", "faq")


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
    faq_threshold: float
    faq_margin: float
    faq_threshold_zh: float | None = None  # None: faq_threshold for every language
    order_pattern: str = DEFAULT_ORDER_PATTERN
    order_example: str = DEFAULT_ORDER_EXAMPLE  # its letters find mistyped numbers
    failures_to_handoff: int = 2
    shop_name: str = ""  # --shop-name: the shop's own name is filler in smalltalk

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
    elif asks_about_order(message):
        order = Candidate("order_status", ORDER_QUESTION_CONFIDENCE)
    small, kind = smalltalk_kind(message, config.shop_name)
    smalltalk = Candidate("smalltalk", small, kind) if small > 0 else None
    return Rules(order_id, mistyped, handoff, order, smalltalk, is_follow_up(message))


def route(
    message: str | Message,
    hits: Sequence[Hit],
    *,
    config: RouterConfig,
    rules: Rules,
) -> Routing:
    """Route one message; ``hits`` are its KB search results, ``rules`` what
    ``read_rules`` found in it (before the search, which a rule's answer skips)."""
    order_id, handoff, order = rules.order_id, rules.handoff, rules.order
    candidates = rules.candidates()

    faq_hit, kb_margin = _top_faq(hits)
    if faq_hit is not None:
        candidates.append(Candidate("faq", faq_hit.score, faq_hit.entry.id))

    ranked = tuple(sorted(candidates, key=lambda c: (-c.confidence, _PRECEDENCE.index(c.intent))))

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

    faq_threshold = config.faq_threshold
    lang = message.lang if isinstance(message, Message) else read_message(message).lang
    if config.faq_threshold_zh is not None and lang == "zh":
        faq_threshold = config.faq_threshold_zh

    def threshold(c: Candidate) -> float:
        return faq_threshold if c.intent == "faq" else RULE_THRESHOLD

    # Only candidates that reach their own threshold compete: a sub-threshold one (one
    # "terrible" next to a clear FAQ match) is no rival interpretation.
    eligible = [c for c in ranked if c.confidence >= threshold(c)]
    if not eligible:
        best = ranked[0]
        reason = f"{best.intent} {best.confidence:.2f} below threshold {threshold(best):.2f}"
        margin = best.confidence - ranked[1].confidence if len(ranked) > 1 else 1.0
        return Routing("general", best.confidence, margin, ranked, order_id=None, reason=reason)

    top = eligible[0]
    margin = top.confidence - eligible[1].confidence if len(eligible) > 1 else 1.0
    fallback: str | None = None
    if margin < config.faq_margin:
        runner = eligible[1].intent
        fallback = f"{top.intent} margin {margin:.2f} over {runner} < {config.faq_margin:.2f}"
    elif top.intent == "faq" and kb_margin < config.faq_margin:
        margin = kb_margin
        fallback = f"faq margin {kb_margin:.2f} over the next answer < {config.faq_margin:.2f}"
    elif top.intent == "faq" and rules.follow_up:
        fallback = FOLLOW_UP_REASON
    if fallback is not None:
        return Routing("general", top.confidence, margin, ranked, reason=fallback)

    if top.intent == "faq":
        return Routing("faq", top.confidence, min(margin, kb_margin), ranked, faq=faq_hit)
    winner_reason = top.detail if top.intent == "handoff" else None
    return Routing(top.intent, top.confidence, margin, ranked, reason=winner_reason)


def _by_precedence(
    winner: Candidate, ranked: tuple[Candidate, ...], order_id: str | None, reason: str | None
) -> Routing:
    others = [c.confidence for c in ranked if c is not winner]
    margin = max(0.0, winner.confidence - max(others)) if others else 1.0
    return Routing(winner.intent, winner.confidence, margin, ranked, order_id, reason=reason)


def _top_faq(hits: Sequence[Hit]) -> tuple[Hit | None, float]:
    """The best phrasing of the best answer when the top hit is an FAQ, and that answer's
    lead over the next answer.

    A passage on top means the best match is not a servable answer: no faq
    candidate. Entries that share an answer (phrasings of it) are not rivals but
    witnesses: an answer scores its best phrasing plus ``SECOND_PHRASING_WEIGHT`` of its
    second, so one phrasing that shares only a frame with the message weighs less than
    an answer that several phrasings fit. ``hits`` must reach far enough down for the
    leading answers' second phrasings (the fast path asks for ``ROUTER_HITS``).
    """
    if not hits or max(hits, key=lambda h: h.score).entry.kind != "faq":
        return None, 0.0
    answers: dict[str, list[Hit]] = {}
    for hit in sorted(hits, key=lambda h: -h.score):
        if hit.entry.kind == "faq":
            answers.setdefault(answer_key(hit.entry.answer), []).append(hit)
    ranked = sorted(answers.values(), key=_answer_score, reverse=True)
    top = ranked[0][0]
    if len(ranked) == 1:
        return top, top.score
    return top, _answer_score(ranked[0]) - _answer_score(ranked[1])


def _answer_score(phrasings: list[Hit]) -> float:
    """An answer's score from its phrasings' hits, best first."""
    second = phrasings[1].score if len(phrasings) > 1 else 0.0
    return phrasings[0].score + SECOND_PHRASING_WEIGHT * second
