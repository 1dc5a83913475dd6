"""A message and its phone-typed twin get the same answer.

Phones type curly apostrophes and quotes, Chinese keyboards full-width letters, digits
and punctuation (，。？！), autocorrect turns hyphens into dashes, and copied text brings
non-breaking and zero-width spaces. None of it changes what the customer asks, so no
rule and no route may tell the twins apart: hypothesis types each message in random
mixtures of these, and the fast path itself answers a fixed set of twins.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kefu import demo
from kefu.fastpath.router import RouterConfig, read_rules
from kefu.fastpath.rules import (
    asks_about_order,
    handoff_score,
    is_failure_signal,
    is_follow_up,
    smalltalk_kind,
)
from kefu.service.fast_path import FastPath
from kefu.text.entities import salient
from kefu.text.message import read_message
from kefu.text.normalize import fold, normalize
from kefu.text.order_numbers import read_order_number
from kefu.text.words import tokens, words_of

MESSAGES = [
    # order questions, numbers whole, closed up and mistyped
    "Where's my order?",
    "What's happening with my delivery?",
    "I haven't received my package yet",
    "my parcel hasn't arrived, it's been 2 weeks",
    "Where's order LH-100234?",
    "status of LH 100234 please",
    "I typed LH-10023, is that right?",
    "我的快递到哪了？",
    "订单LH-100234什么时候发货？",
    # handoff, anger, failure, follow-up
    "I'd like to speak to a human, please",
    "can't you put me through to an agent?",
    "This is UNACCEPTABLE, you people never answer!!",
    "that didn't help, it's not what I asked",
    "转人工！",
    "你说的不对，答非所问。",
    "and the refund?",
    "what about express?",
    "运费呢？",
    # smalltalk
    "thanks, that's helpful!",
    "hi there, how's it going?",
    "you're great, bye!",
    "谢谢，再见。",
    # questions for the knowledge base, near misses and the guard's patterns
    "How long does delivery take?",
    "Can I return an item after 30 days?",
    "Do you ship to Singapore?",
    "I don't need a password reset, I forgot my email",
    "do you sell sofa legs?",
    "which duvet size should I buy?",
    'what\'s the "price match" policy?',
    "I paid $1,299.00 on 2024-03-05 - why?",
    "我不是要退货，就想问运费。",
    "德国可以寄吗？",
    "能不能开发票？",
]

FULL_WIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
# What a phone, a Chinese keyboard, autocorrect or a paste may type for a character.
VARIANTS: dict[str, list[str]] = {
    "'": ["\u2019", "\u2018", "\uff07"],
    '"': ["\u201c", "\u201d", "\uff02"],
    " ": ["\u00a0", "\u3000", "\u202f", "  ", " \u200b"],
    "-": ["\u2010", "\u2011", "\u2013", "\u2212", "\uff0d"],
    ".": ["\u3002", "\uff0e"],
    ",": ["\uff0c"],
    "\uff0c": [","],  # ，
    "\u3002": ["."],  # 。
    "\uff1f": ["?"],  # ？
    "\uff01": ["!"],  # ！
}


def variants(char: str) -> list[str]:
    out = [char, *VARIANTS.get(char, [])]
    if char in FULL_WIDTH and FULL_WIDTH[char] not in out:
        out.append(FULL_WIDTH[char])
    return out


@st.composite
def twins(draw: st.DrawFn) -> tuple[str, str]:
    message = draw(st.sampled_from(MESSAGES))
    twin = "".join(draw(st.sampled_from(variants(char))) for char in message)
    return message, twin


CONFIG = RouterConfig(order_pattern=demo.ORDER_PATTERN, order_example=demo.ORDER_EXAMPLE)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(twins())
def test_every_rule_reads_a_twin_as_the_message(pair: tuple[str, str]) -> None:
    message, twin = pair
    assert fold(twin) == fold(message)
    assert normalize(twin) == normalize(message)
    assert words_of(twin) == words_of(message)
    assert tokens(twin) == tokens(message)
    assert salient(twin) == salient(message)
    assert read_order_number(twin, demo.ORDER_PATTERN, "LH-100234") == read_order_number(
        message, demo.ORDER_PATTERN, "LH-100234"
    )
    assert handoff_score(twin) == handoff_score(message)
    assert smalltalk_kind(twin) == smalltalk_kind(message)
    assert asks_about_order(twin) == asks_about_order(message)
    assert is_failure_signal(twin) == is_failure_signal(message)
    assert is_follow_up(twin) == is_follow_up(message)
    assert read_rules(twin, failures=0, config=CONFIG) == read_rules(
        message, failures=0, config=CONFIG
    )
    assert read_message(twin).lang == read_message(message).lang


def test_the_rules_hear_what_the_messages_say() -> None:
    """The table is not vacuous: its messages fire the rules the twins must agree on."""
    assert asks_about_order("Where\u2019s my order?")
    assert handoff_score("I\u2019d like to speak to a human, please")[0] == 1.0
    assert smalltalk_kind("thanks, that\u2019s helpful!")[1] == "thanks"
    assert is_failure_signal("that didn\u2019t help, it\u2019s not what I asked")
    assert is_follow_up("运费呢?")
    orders = read_rules("订单ＬＨ－１００２３４什么时候发货?", failures=0, config=CONFIG)  # noqa: RUF001
    assert orders.order_id == "LH-100234"


def phone(message: str) -> str:
    """How a phone types it: curly apostrophes and quotes, a non-breaking space."""
    out = message.replace("'", "\u2019").replace(' "', " \u201c").replace('"', "\u201d")
    return out.replace(" ", "\u00a0", 1)


def chinese_keyboard(message: str) -> str:
    """Full-width letters, digits and punctuation, an ideographic space."""
    return "".join(FULL_WIDTH.get(c, "\u3000" if c == " " else c) for c in message)


def ascii_keyboard(message: str) -> str:
    """Chinese typed on an English keyboard: ASCII punctuation."""
    return message.translate(str.maketrans("，。？！：", ",.?!:"))


@pytest.mark.anyio
@pytest.mark.parametrize("typed", [phone, chinese_keyboard, ascii_keyboard])
async def test_the_fast_path_answers_a_twin_as_the_message(
    fast_path: FastPath, typed: Callable[[str], str]
) -> None:
    scope = fast_path.scope("t")
    for message in MESSAGES:
        twin = typed(message)
        mine = await fast_path.plan(message, scope=scope, failures=0)
        theirs = await fast_path.plan(twin, scope=scope, failures=0)
        said = (mine.tier, mine.routing.intent, mine.routing.order_id, mine.reply, mine.source)
        heard = (theirs.tier, theirs.routing.intent, theirs.routing.order_id, theirs.reply)
        assert heard == said[:4], (message, twin)
        assert theirs.source == mine.source, (message, twin)
