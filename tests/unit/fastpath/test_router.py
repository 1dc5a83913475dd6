"""route(): precedence, thresholds, margins and failures among the rules (a message no
rule takes goes to the FAQ decision, ``kefu.faq``)."""

from __future__ import annotations

import pytest

from kefu import demo
from kefu.fastpath.router import (
    FAILED_REASON,
    MISTYPED_REASON,
    ORDER_QUESTION_CONFIDENCE,
    RULE_THRESHOLD,
    Candidate,
    RouterConfig,
    Routing,
    read_rules,
    route,
)

CONFIG = RouterConfig(order_pattern=demo.ORDER_PATTERN, order_example=demo.ORDER_EXAMPLE)


def go(message: str, failures: int = 0, config: RouterConfig = CONFIG) -> Routing:
    rules = read_rules(message, failures=failures, config=config)
    return route(message, config=config, rules=rules)


def test_no_rule_is_general() -> None:
    routing = go("what is your return policy?")
    assert (routing.intent, routing.reason, routing.candidates) == ("general", "no candidate", ())


def test_order_id() -> None:
    routing = go("how can I track my order LH-100234")
    assert routing.intent == "order_status"
    assert routing.order_id == "LH-100234"
    assert routing.confidence == 1.0
    assert routing.candidates[0] == Candidate("order_status", 1.0, "LH-100234")


def test_order_id_zh() -> None:
    routing = go("订单lh100187到哪了")
    assert (routing.intent, routing.order_id, routing.margin) == ("order_status", "LH-100187", 1.0)


def test_order_question_without_id() -> None:
    routing = go("where is my parcel?")
    assert routing.intent == "order_status"
    assert routing.order_id is None
    assert routing.confidence == ORDER_QUESTION_CONFIDENCE
    assert go("how can I track my order?").intent == "general"  # how tracking works: the FAQ's


def test_a_mistyped_order_number_goes_to_the_order_tool() -> None:
    routing = go("where's my order LH-10023")
    assert (routing.intent, routing.order_id, routing.confidence) == ("order_status", None, 1.0)
    assert routing.reason == MISTYPED_REASON
    assert go("where's my order LH 100234").order_id == "LH-100234"  # closed up, it is one
    rules = read_rules("where's my order LH-10023", failures=0, config=CONFIG)
    assert (rules.order_id, rules.mistyped_order_id) == (None, "LH-10023")
    assert go("LH-10023 STILL not here, this is a scam").intent == "handoff"


def test_custom_order_pattern() -> None:
    config = RouterConfig(order_pattern=r"\b\d{8}\b")
    assert go("where is 12345678", config=config).order_id == "12345678"
    assert go("where is LH-100234", config=config).order_id is None


def test_explicit_human_beats_everything() -> None:
    routing = go("I want a human, order LH-100234")
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


def test_a_complaint_hands_off() -> None:
    routing = go("I want to make a complaint")
    assert (routing.intent, routing.reason) == ("handoff", "asked for a human")
    assert routing.confidence == pytest.approx(0.8)


def test_mild_anger_alone_is_below_the_rule_threshold() -> None:
    routing = go("the colour is terrible")
    assert routing.intent == "general"
    assert routing.reason == f"handoff 0.60 below threshold {RULE_THRESHOLD:.2f}"
    assert [c.intent for c in routing.candidates] == ["handoff"]


def test_failed_twice_hands_off() -> None:
    routing = go("that didn't help", failures=1)
    assert (routing.intent, routing.reason, routing.confidence) == ("handoff", FAILED_REASON, 1.0)
    assert go("没用", failures=1).intent == "handoff"


def test_previous_failures_alone_can_hand_off() -> None:
    assert go("what is your return policy", failures=2).intent == "handoff"
    config = RouterConfig(failures_to_handoff=3)
    routing = go("答非所问", failures=2, config=config)
    assert (routing.intent, routing.reason) == ("handoff", "the bot failed 3 times")


def test_one_failure_is_not_yet_a_handoff() -> None:
    assert go("that didn't help").intent == "general"  # the caller counts it


def test_smalltalk() -> None:
    routing = go("hi there!")
    assert (routing.intent, routing.confidence) == ("smalltalk", 0.9)
    assert routing.candidates[0].detail == "greeting"


def test_greeting_with_a_question_is_not_smalltalk() -> None:
    assert go("hi, what is your return policy?").intent == "general"


def test_two_rules_close_together_are_ambiguous() -> None:
    rules = read_rules("where is my parcel?", failures=0, config=CONFIG)
    close = Candidate("handoff", ORDER_QUESTION_CONFIDENCE + 0.01, "angry")
    routing = route(
        "where is my parcel?",
        config=CONFIG,
        rules=rules.__class__(
            rules.order_id, rules.mistyped_order_id, close, rules.order, rules.smalltalk, False
        ),
    )
    assert routing.intent == "general"
    assert routing.reason is not None
    assert routing.reason.startswith("handoff margin 0.01 over order_status")
