"""Smalltalk: only a message that is nothing else; templated EN/ZH replies."""

from __future__ import annotations

import pytest

from kefu.fastpath.smalltalk import (
    KINDS,
    SMALLTALK_CONFIDENCE,
    shop_names,
    smalltalk_kind,
    smalltalk_reply,
)


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("hi", "greeting"),
        ("Hello!", "greeting"),
        ("hey there 😊", "greeting"),
        ("Good morning", "greeting"),
        ("is anyone there?", "greeting"),
        ("你好", "greeting"),
        ("您好啊", "greeting"),
        ("在吗？", "greeting"),
        ("亲，在吗", "greeting"),
        ("哈喽", "greeting"),
        ("how are you?", "how_are_you"),
        ("hi, how are you doing today?", "how_are_you"),
        ("你好吗", "how_are_you"),
        ("who are you?", "who_are_you"),
        ("are you a bot?", "who_are_you"),
        ("Are you a real person?", "who_are_you"),
        ("am I talking to a bot or a person?", "who_are_you"),
        ("am I talking to a real person?", "who_are_you"),
        ("what can you do", "who_are_you"),
        ("你是谁", "who_are_you"),
        ("你是机器人吗", "who_are_you"),
        ("你能做什么？", "who_are_you"),
        ("thanks", "thanks"),
        ("Thank you so much!", "thanks"),
        ("ok thanks", "thanks"),
        ("谢谢你", "thanks"),
        ("好的，谢谢", "thanks"),
        ("辛苦了", "thanks"),
        ("great, that helped a lot", "thanks"),
        ("问题解决了，谢谢", "thanks"),
        ("bye", "goodbye"),
        ("thanks, bye!", "goodbye"),
        ("see you later", "goodbye"),
        ("have a nice day", "goodbye"),
        ("that's all, thank you", "goodbye"),
        ("再见", "goodbye"),
        ("拜拜", "goodbye"),
        ("没事了，谢谢", "goodbye"),
        ("ok", "ack"),
        ("got it", "ack"),
        ("好的", "ack"),
        ("嗯嗯", "ack"),
    ],
)
def test_smalltalk(message: str, kind: str) -> None:
    assert smalltalk_kind(message) == (SMALLTALK_CONFIDENCE, kind)


@pytest.mark.parametrize(
    "message",
    [
        "hi, where is my refund?",
        "thanks, but where is my order?",
        "hello I need help with a return",
        "你好，我的订单到哪了",
        "谢谢，退款什么时候到",
        "what can you do about my damaged sofa?",
        "ok so how do I cancel",
        "hiking chairs?",  # "hi" is not a greeting inside a word
        "so",  # only filler
        "good",
        "",
        "   ",
        "收到货了",
        "早点发货可以吗",
        "that helps?",  # asks whether it does
        "问题解决了吗",
        "解决了？",
    ],
)
def test_not_smalltalk(message: str) -> None:
    assert smalltalk_kind(message) == (0.0, None)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_both_languages(kind: str) -> None:
    en, zh = smalltalk_reply(kind, "en"), smalltalk_reply(kind, "zh")
    assert en != zh
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh)
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in en)


def test_greeting_reply_introduces_the_shop() -> None:
    named = {"shop_name": "Acme|艾克美", "order_example": "AC-100234"}
    assert smalltalk_reply("greeting", "en", **named) == (
        "Hello! I'm the Acme assistant — how can I help you today?"
    )
    assert "艾克美" in smalltalk_reply("greeting", "zh", **named)
    assert "human" in smalltalk_reply("who_are_you", "en")
    assert "AC-100234" in smalltalk_reply("who_are_you", "zh", **named)
    assert "AB12345" in smalltalk_reply("who_are_you", "en", order_example="AB12345")


def test_a_shop_without_a_name_or_orders_gets_replies_that_claim_neither() -> None:
    assert (
        smalltalk_reply("greeting", "en") == "Hello! I'm the assistant — how can I help you today?"
    )
    assert smalltalk_reply("greeting", "zh") == "您好！我是智能客服，请问有什么可以帮您？"
    for lang in ("en", "zh"):
        who = smalltalk_reply("who_are_you", lang)
        assert "order" not in who
        assert "订单" not in who
    assert smalltalk_reply("goodbye", "en") == "Thanks for chatting with us — have a nice day!"
    assert smalltalk_reply("goodbye", "zh") == "感谢您的咨询，祝您生活愉快，再见！"


def test_replies_name_the_shop_in_each_language() -> None:
    assert shop_names("Acme") == ("Acme", "Acme")
    assert shop_names("Acme|艾克美") == ("Acme", "艾克美")
    assert "Thanks for chatting with Acme" in smalltalk_reply("goodbye", "en", shop_name="Acme")
    assert "艾克美" in smalltalk_reply("goodbye", "zh", shop_name="Acme|艾克美")


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown smalltalk kind 'weather'"):
        smalltalk_reply("weather", "en")


def test_the_shop_s_own_name_is_filler_and_no_other_shop_s() -> None:
    """``--shop-name`` names the shop customers thank; the demo's name is not built in."""
    assert smalltalk_kind("thanks Acme!", "Acme|艾克美") == (SMALLTALK_CONFIDENCE, "thanks")
    assert smalltalk_kind("谢谢艾克美", "Acme|艾克美") == (SMALLTALK_CONFIDENCE, "thanks")
    assert smalltalk_kind("thanks Acme!") == (0.0, None)
    assert smalltalk_kind("thanks Lumen Home!", "Acme") == (0.0, None)


def test_a_shop_name_or_order_example_with_braces_is_written_as_it_is() -> None:
    assert smalltalk_reply("greeting", "en", shop_name="A{b}") == (
        "Hello! I'm the A{b} assistant — how can I help you today?"
    )
    assert smalltalk_reply("goodbye", "zh", shop_name="A{0}|艾{name}") == (
        "感谢您咨询艾{name}，祝您生活愉快，再见！"
    )
    who = smalltalk_reply("who_are_you", "en", shop_name="{}", order_example="{example}")
    assert who.startswith("I'm the {} virtual assistant")
    assert "(like {example})" in who


def test_a_language_without_replies_is_answered_in_english() -> None:
    for kind in KINDS:
        english = smalltalk_reply(kind, "en", shop_name="Acme|艾克美", order_example="AC-1")
        for lang in ("fr", "", "zh-CN"):
            assert smalltalk_reply(kind, lang, shop_name="Acme|艾克美", order_example="AC-1") == (
                english
            )


def test_replies_and_phrases_are_the_packs() -> None:
    from kefu.text import packs

    for lang in ("en", "zh"):
        data = packs.of("smalltalk", lang)
        assert set(data["replies"]) == set(KINDS)
        assert set(data["phrases"]) == set(KINDS)
        assert set(data["named"]) == set(data["unnamed"])
    assert smalltalk_reply("ack", "zh") == packs.of("smalltalk", "zh")["replies"]["ack"]
