"""The rule detectors: order questions, handoff, failure signals (EN + ZH)."""

from __future__ import annotations

import pytest

from kefu.fastpath.rules import (
    ANGRY,
    ASKED_FOR_HUMAN,
    asks_about_order,
    handoff_score,
    is_failure_signal,
)


@pytest.mark.parametrize(
    "message",
    [
        "Where is my order?",
        "where's my parcel",
        "Has my package shipped yet?",
        "When will my order arrive?",
        "My order still hasn't arrived",
        "I haven't received my package",
        "what's the status of my order",
        "my delivery is late",
        "我的物流到哪了",
        "包裹到哪里了",
        "我的快递怎么还没到",
        "订单发货了吗",
        "帮我查一下订单",
        "订单什么时候能到",
        "东西还没收到",
        "上周五下的单，现在什么状态了",
        "any news about my delivery?",
        "whats going on with my parcel",
        "what happened to my package??",
    ],
)
def test_asks_about_order(message: str) -> None:
    assert asks_about_order(message)


@pytest.mark.parametrize(
    "message",
    [
        "How long does delivery take?",
        "How can I track my order?",  # how tracking works: the FAQ's question
        "在哪里看物流信息",
        "Do you offer express delivery?",
        "有加急快递吗？",
        "快递来的时候我不在家怎么办？",
        "Where is my refund?",
        "退款还没到账",
        "退货进度怎么查",
        "收到的不是我买的东西",
        "How do I track a FedEx package someone else sent me?",
        "哪家物流公司送货？",
        "how can I get an update on my order?",
        "I want an update on my delivery address",
        "what happened to my refund",
        "any news about my order cancellation?",  # the cancellation FAQ's question
        "any update on my order refund?",
        "what's up with my delivery charge?",
    ],
)
def test_not_an_order_question(message: str) -> None:
    assert not asks_about_order(message)


@pytest.mark.parametrize(
    "message",
    [
        "let me talk to a real person",
        "Can I speak to a human agent?",
        "agent please",
        "Human!",
        "connect me to your staff",
        "I want to speak to the manager",
        "get me a human",
        "I need a representative",
        "转人工",
        "人工客服",
        "我要人工服务",
        "换个真人来",
        "给我转接客服人员",
        "我要和你们主管谈",
        "找个活人来",
    ],
)
def test_handoff_asked_for_a_human(message: str) -> None:
    assert handoff_score(message) == (1.0, ASKED_FOR_HUMAN)


@pytest.mark.parametrize("message", ["I want to make a complaint", "我要投诉", "我要投诉你们"])
def test_a_complaint_is_a_request_for_a_person_below_explicit(message: str) -> None:
    confidence, reason = handoff_score(message)
    assert 0.7 <= confidence < 1.0
    assert reason == ASKED_FOR_HUMAN


@pytest.mark.parametrize(
    "message",
    [
        "this is a scam",
        "what a load of bullshit",
        "I'm furious",
        "you are useless and this is ridiculous",
        "why is this so terrible!!!",
        "WHY HAS NOBODY ANSWERED MY EMAIL?!",  # shouting and ?!
        "垃圾客服",
        "气死我了",
        "什么破网站",
        "太差了！！",
        "我很生气",
        "you people are useless",
        "hopeless, nobody ever answers my emails",
        "太差了，打电话也没人接",
    ],
)
def test_handoff_angry(message: str) -> None:
    confidence, reason = handoff_score(message)
    assert confidence >= 0.8
    assert reason == ANGRY


def test_anger_with_a_request_is_a_request_that_apologises() -> None:
    assert handoff_score("this is useless, get me a human!!!") == (1.0, ANGRY)
    assert handoff_score("垃圾机器人，转人工") == (1.0, ANGRY)
    # Mild anger alongside a request: the request is the reason.
    assert handoff_score("terrible. a human please") == (1.0, ASKED_FOR_HUMAN)


@pytest.mark.parametrize(
    "message",
    [
        "If no one answers the door, what then?!",
        "thank you people!!",
        "you people are great!!",
        "家里没人接收快递怎么办？！",
    ],
)
def test_waiting_words_that_are_not_anger(message: str) -> None:
    # The "?!" or "!!" is the one mild sign: the words add none, so no handoff.
    confidence, _ = handoff_score(message)
    assert confidence == pytest.approx(0.6)


def test_one_mild_sign_is_weak() -> None:
    # One "terrible" or "!!" alone is not enough to leave the answer path (router: 0.7).
    for message in ("the colour is terrible", "Hello!!", "THIS IS NOT OK AT ALL", "很失望"):
        confidence, reason = handoff_score(message)
        assert confidence == pytest.approx(0.6), message
        assert reason == ANGRY


@pytest.mark.parametrize(
    "message",
    [
        "What is your human resources policy?",  # decided: the HR department, not a person
        "are you a real person?",  # who-are-you smalltalk
        "Is this a bot?",
        "你是真人吗",
        "你是人工智能吗",
        "安装要人工费吗",
        "人工客服几点上班？",  # asks the hours, the FAQ answers
        "How can I contact customer service?",
        "怎么联系客服？",
        "I'd like someone to help me choose a sofa",
        "Do you sell 滚筒 laundry baskets?",
        "垃圾桶有货吗",  # a bin, not an insult
        "安装需要人来上门吗",
        "Where is my order LH-100234?",
        "I LOVE IT",  # two capitalised words are not shouting
        "WHERE IS AB-12345",  # nor a code of another shop's shape
        "am I talking to a real person?",  # who-are-you smalltalk
        "",
    ],
)
def test_not_handoff(message: str) -> None:
    assert handoff_score(message) == (0.0, None)


@pytest.mark.parametrize(
    "message",
    [
        "that didn't help",
        "That doesn't answer my question",
        "not what I asked",
        "you didn't answer my question",
        "that's wrong",
        "this makes no sense",
        "useless",
        "I already asked that",
        "this is the third time I'm asking",
        "没用",
        "答非所问",
        "这不是我要问的",
        "你根本没回答我的问题",
        "你听不懂吗",
        "说了等于没说",
        "我都问了三遍了",
    ],
)
def test_failure_signal(message: str) -> None:
    assert is_failure_signal(message)


@pytest.mark.parametrize(
    "message",
    [
        "thanks, that helped",
        "How do I return an item?",
        "I didn't receive my refund",
        "不锈钢锅可以用洗碗机洗吗",
        "尺寸不对可以换吗",
        "没看懂安装说明书",
        "我说了地址是错的，能改吗",
        "where is my order?",
    ],
)
def test_not_a_failure_signal(message: str) -> None:
    assert not is_failure_signal(message)
