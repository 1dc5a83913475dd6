"""route(): thresholds, margins, precedence, failures — on synthetic KB hits."""

from __future__ import annotations

import pytest

from kefu.fastpath.router import (
    FAILED_REASON,
    FOLLOW_UP_REASON,
    MISTYPED_REASON,
    ORDER_QUESTION_CONFIDENCE,
    RULE_THRESHOLD,
    SECOND_PHRASING_WEIGHT,
    Candidate,
    RouterConfig,
    Routing,
    read_rules,
    route,
)
from kefu.knowledge.base import Hit
from kefu.knowledge.entries import KbEntry

CONFIG = RouterConfig(faq_threshold=0.62, faq_margin=0.08, order_pattern=r"\bLH-?\d{6}\b")


def hit(question: str, score: float, *, answer: str | None = None, kind: str = "faq") -> Hit:
    entry = KbEntry.make(question, answer or f"answer to {question}", kind=kind)  # type: ignore[arg-type]
    return Hit(entry=entry, score=score, lexical=score, dense=score)


RETURNS = hit("What is your return policy?", 0.9)
REFUND = hit("How long does a refund take?", 0.5)


def go(message: str, *hits: Hit, failures: int = 0, config: RouterConfig = CONFIG) -> Routing:
    rules = read_rules(message, failures=failures, config=config)
    return route(message, hits, config=config, rules=rules)


def test_confident_faq_is_served() -> None:
    routing = go("what's your returns policy", RETURNS, REFUND)
    assert routing.intent == "faq"
    assert routing.faq is RETURNS
    assert routing.confidence == pytest.approx(0.9)
    assert routing.margin == pytest.approx(0.4)
    assert routing.candidates == (Candidate("faq", 0.9, RETURNS.entry.id),)
    assert routing.reason is None


def test_faq_below_threshold_goes_general() -> None:
    routing = go("something vaguely about returns", hit("What is your return policy?", 0.55))
    assert routing.intent == "general"
    assert routing.faq is None
    assert routing.reason == "faq 0.55 below threshold 0.62"


def test_faq_exactly_at_threshold_is_served() -> None:
    assert go("returns?", hit("What is your return policy?", 0.62)).intent == "faq"


def test_two_close_faqs_are_ambiguous() -> None:
    routing = go("returns and refunds", RETURNS, hit("How do I start a return?", 0.85))
    assert routing.intent == "general"
    assert routing.margin == pytest.approx(0.05)
    assert routing.reason == "faq margin 0.05 over the next answer < 0.08"


def test_twins_with_the_same_answer_are_not_rivals() -> None:
    twin = hit("Return policy?", 0.88, answer=RETURNS.entry.answer)
    routing = go("return policy", RETURNS, twin, REFUND)
    assert routing.intent == "faq"
    assert routing.faq is RETURNS
    # The twin adds to its answer's lead over the refund FAQ rather than cutting it.
    assert routing.margin == pytest.approx(0.9 + SECOND_PHRASING_WEIGHT * 0.88 - 0.5)


def test_an_answer_two_phrasings_fit_beats_one_phrasing_of_another() -> None:
    # "when do I get the money back": one phrasing of the failed-payment answer shares its
    # frame best, but two phrasings of the refund answer fit it.
    held = hit("When is the money held by a failed payment returned?", 0.64)
    refund = hit("When will I get my refund?", 0.62)
    refund_twin = hit("How long until the money is back?", 0.6, answer=refund.entry.answer)
    routing = go("when do i get the money back", held, refund, refund_twin)
    assert routing.intent == "faq"
    assert routing.faq is refund
    assert routing.confidence == pytest.approx(0.62)  # its own phrasing's score
    assert routing.margin == pytest.approx(0.62 + SECOND_PHRASING_WEIGHT * 0.6 - 0.64)


def test_the_runner_ups_second_phrasing_narrows_the_lead() -> None:
    returns_twin = hit("Return policy?", 0.5, answer=RETURNS.entry.answer)
    refund = hit("How long does a refund take?", 0.8)
    refund_twin = hit("When is my money back?", 0.7, answer=refund.entry.answer)
    routing = go("returns and refunds", RETURNS, returns_twin, refund, refund_twin)
    # 0.9 + 0.2 * 0.5 against 0.8 + 0.2 * 0.7: a lead of 0.06, under the 0.08 margin.
    assert routing.intent == "general"
    assert routing.margin == pytest.approx(0.9 + SECOND_PHRASING_WEIGHT * (0.5 - 0.7) - 0.8)


def test_a_follow_up_on_an_earlier_message_is_not_faq() -> None:
    shipping = hit("Which countries do you ship to?", 0.9)
    shipping_zh = hit("能寄到哪些国家？", 0.9)
    for message, top in [
        ("And the refund?", RETURNS),
        ("what about Japan?", shipping),
        ("运费呢？", shipping_zh),
    ]:
        routing = go(message, top, REFUND)
        assert (routing.intent, routing.reason) == ("general", FOLLOW_UP_REASON)
    # A question of its own that opens the same way is not one.
    message = "what about returns of things bought in the holiday sale last month?"
    assert go(message, RETURNS).intent == "faq"


def test_a_close_passage_is_not_a_rival_faq() -> None:
    passage = hit("Returns (handbook)", 0.88, kind="passage")
    assert go("return policy", RETURNS, passage).intent == "faq"


def test_a_passage_on_top_means_no_faq() -> None:
    passage = hit("Returns (handbook)", 0.95, kind="passage")
    routing = go("return policy", passage, RETURNS)
    assert routing.intent == "general"
    assert routing.candidates == ()
    assert routing.reason == "no candidate"


def test_hits_out_of_order_are_sorted() -> None:
    assert go("return policy", REFUND, RETURNS).faq is RETURNS


def test_no_hits_no_rules_is_general() -> None:
    routing = go("what's the capital of australia")
    assert routing == Routing("general", 0.0, 1.0, (), reason="no candidate")


def test_order_id_beats_faq() -> None:
    track = hit("How can I track my order?", 0.97)
    routing = go("how can I track my order LH-100234", track)
    assert routing.intent == "order_status"
    assert routing.order_id == "LH-100234"
    assert routing.confidence == 1.0
    assert routing.candidates[0] == Candidate("order_status", 1.0, "LH-100234")


def test_order_id_zh() -> None:
    routing = go("订单lh100187到哪了")
    assert (routing.intent, routing.order_id, routing.margin) == ("order_status", "LH-100187", 1.0)


def test_order_question_without_id() -> None:
    routing = go("where is my parcel?", hit("How can I track my order?", 0.5))
    assert routing.intent == "order_status"
    assert routing.order_id is None
    assert routing.confidence == ORDER_QUESTION_CONFIDENCE


def test_order_question_close_to_a_faq_is_ambiguous() -> None:
    routing = go("where is my parcel?", hit("How can I track my order?", 0.72))
    assert routing.intent == "general"
    assert routing.reason == "order_status margin 0.03 over faq < 0.08"


def test_a_mistyped_order_number_goes_to_the_order_tool() -> None:
    # Like a whole number, it wins by precedence: the customer is asking about an order.
    routing = go("where's my order LH-10023", hit("How can I track my order?", 0.9))
    assert (routing.intent, routing.order_id, routing.confidence) == ("order_status", None, 1.0)
    assert routing.reason == MISTYPED_REASON
    assert go("where's my order LH 100234").order_id == "LH-100234"  # closed up, it is one
    rules = read_rules("where's my order LH-10023", failures=0, config=CONFIG)
    assert (rules.order_id, rules.mistyped_order_id) == (None, "LH-10023")
    assert go("LH-10023 STILL not here, this is a scam").intent == "handoff"


def test_custom_order_pattern() -> None:
    config = RouterConfig(faq_threshold=0.62, faq_margin=0.08, order_pattern=r"\b\d{8}\b")
    assert go("where is 12345678", config=config).order_id == "12345678"
    assert go("where is LH-100234", config=config).order_id is None


def test_explicit_human_beats_everything() -> None:
    routing = go("I want a human, order LH-100234", RETURNS)
    assert routing.intent == "handoff"
    assert routing.reason == "asked for a human"
    assert routing.order_id == "LH-100234"  # still reported, for the agent
    assert routing.confidence == 1.0


def test_strong_anger_about_an_order_hands_off() -> None:
    routing = go("LH-100234 STILL not here, this is a scam")
    assert (routing.intent, routing.reason) == ("handoff", "angry")
    assert routing.margin == 0.0  # won by precedence over the order id's 1.0


def test_mild_anger_about_an_order_gets_the_status() -> None:
    assert go("LH-100234 is late, terrible").intent == "order_status"


def test_complaint_beats_a_weaker_faq() -> None:
    routing = go("I want to make a complaint", hit("How can I contact customer service?", 0.6))
    assert (routing.intent, routing.reason) == ("handoff", "asked for a human")
    assert routing.confidence == pytest.approx(0.8)


def test_mild_anger_alone_is_below_the_rule_threshold() -> None:
    routing = go("the colour is terrible")
    assert routing.intent == "general"
    assert routing.reason == f"handoff 0.60 below threshold {RULE_THRESHOLD:.2f}"


def test_a_sub_threshold_rule_is_no_rival() -> None:
    routing = go("your return policy is terrible", hit("What is your return policy?", 0.64))
    assert routing.intent == "faq"
    assert routing.margin == pytest.approx(0.64)  # no eligible runner-up, no other FAQ
    assert [c.intent for c in routing.candidates] == ["faq", "handoff"]
    lenient = RouterConfig(faq_threshold=0.5, faq_margin=0.08)
    below = go(
        "your return policy is terrible", hit("What is your return policy?", 0.58), config=lenient
    )
    assert [c.intent for c in below.candidates] == ["handoff", "faq"]  # ranked first, not eligible
    assert below.intent == "faq"


def test_failed_twice_hands_off() -> None:
    routing = go("that didn't help", RETURNS, failures=1)
    assert (routing.intent, routing.reason, routing.confidence) == ("handoff", FAILED_REASON, 1.0)
    assert go("没用", failures=1).intent == "handoff"


def test_previous_failures_alone_can_hand_off() -> None:
    assert go("what is your return policy", RETURNS, failures=2).intent == "handoff"
    config = RouterConfig(0.62, 0.08, failures_to_handoff=3)
    routing = go("答非所问", failures=2, config=config)
    assert (routing.intent, routing.reason) == ("handoff", "the bot failed 3 times")


def test_one_failure_is_not_yet_a_handoff() -> None:
    routing = go("that didn't help", RETURNS)
    assert routing.intent == "faq"  # the caller counts it; the next failure hands off


def test_smalltalk() -> None:
    routing = go("hi there!", hit("How can I contact customer service?", 0.3))
    assert (routing.intent, routing.confidence) == ("smalltalk", 0.9)
    assert routing.candidates[0].detail == "greeting"


def test_greeting_with_a_question_is_not_smalltalk() -> None:
    assert go("hi, what is your return policy?", RETURNS).intent == "faq"


def test_smalltalk_close_to_a_faq_is_ambiguous() -> None:
    routing = go("what can you do", hit("What can you do for bulk orders?", 0.87))
    assert routing.intent == "general"
    assert routing.candidates[0].intent == "smalltalk"  # a tie goes to the rule


def test_candidates_best_first() -> None:
    routing = go("where is my order? how can I track it", hit("How can I track my order?", 0.9))
    assert [c.intent for c in routing.candidates] == ["faq", "order_status"]
    assert routing.intent == "faq"
    assert routing.margin == pytest.approx(0.9 - ORDER_QUESTION_CONFIDENCE)


def test_chinese_has_a_threshold_of_its_own() -> None:
    config = RouterConfig(faq_threshold=0.45, faq_margin=0.03, faq_threshold_zh=0.3)
    policy = hit("退货政策是什么？", 0.35)
    assert go("退货政策", policy, config=config).intent == "faq"
    assert go("return policy", hit("What is your return policy?", 0.35), config=config).reason == (
        "faq 0.35 below threshold 0.45"
    )
    shared = RouterConfig(faq_threshold=0.45, faq_margin=0.03)
    assert go("退货政策", policy, config=shared).intent == "general"
