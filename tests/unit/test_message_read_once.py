"""A message is normalised once through the fast path, whichever way it is answered.

Every normalisation of kefu goes through ``unicodedata.normalize`` (NFKC, in
``kefu.text.normalize.fold``); counting the calls made on the message's own text while
the fast path plans an answer counts how often the message is read.
"""

from __future__ import annotations

import unicodedata

import pytest

from kefu.service.fast_path import FastPath

# One message per way through the fast path: a rule (order, smalltalk, handoff), an
# exact question, a knowledge-base answer, a miss that goes to the LLM past the cache,
# in English and Chinese, typed on a phone (curly apostrophe, full-width, NBSP).
MESSAGES = {
    "order question": "Where\u2019s my order?",
    "order number": "where is order " + "".join(chr(ord(c) + 0xFEE0) for c in "LH-100234"),
    "smalltalk": "thanks\u00a0so much!",
    "handoff": "I want to talk to a real person",
    "exact question": "How long does delivery take?",
    "faq": "how many days does delivery usually take?",
    "to the llm": "Which novel would you recommend for a long train ride?",
    "chinese faq": "运费怎么算？",
    "chinese, to the llm": "你们觉得明天会下雨吗？",
}


def counting(monkeypatch: pytest.MonkeyPatch, message: str) -> list[str]:
    """The calls to NFKC on the message's text (as typed, or in any form read from it)."""
    nfkc = unicodedata.normalize

    def canonical(text: str) -> str:  # the message in any form kefu reads it in
        return " ".join(nfkc("NFKC", text).replace("\u2019", "'").casefold().split())

    mine = canonical(message)
    calls: list[str] = []

    def normalize(form: str, text: str) -> str:
        if canonical(text) == mine:
            calls.append(text)
        return nfkc(form, text)  # type: ignore[arg-type]

    monkeypatch.setattr(unicodedata, "normalize", normalize)
    return calls


@pytest.mark.anyio
@pytest.mark.parametrize("way", list(MESSAGES))
async def test_the_fast_path_normalises_a_message_once(
    fast_path: FastPath, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    message = MESSAGES[way]
    await fast_path.plan(message, scope=fast_path.scope("t"), failures=0)  # warm: KB read
    calls = counting(monkeypatch, message)
    plan = await fast_path.plan(message, scope=fast_path.scope("t"), failures=0)
    monkeypatch.undo()
    assert len(calls) == 1, (way, plan.routing.intent, calls)


@pytest.mark.anyio
async def test_the_ways_are_the_ones_named(fast_path: FastPath) -> None:
    """The messages above do take the ways they are named for."""
    scope = fast_path.scope("t")
    tiers = {way: await fast_path.plan(m, scope=scope, failures=0) for way, m in MESSAGES.items()}
    assert tiers["order question"].routing.intent == "order_status"
    assert tiers["order number"].routing.order_id == "LH-100234"
    assert tiers["smalltalk"].routing.intent == "smalltalk"
    assert tiers["handoff"].routing.intent == "handoff"
    assert tiers["exact question"].tier == "faq"
    assert tiers["to the llm"].tier == "llm"
    assert tiers["chinese, to the llm"].tier == "llm"
