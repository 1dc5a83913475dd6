"""The prompts read before /ready: the embedded engine's warm-up, cold then warm."""

from __future__ import annotations

import pytest

from kefu.engine.fake import FakeEngine
from kefu.service.first_prompt import QUESTION, read_first_prompts

pytestmark = pytest.mark.anyio

PASSAGES = [("How long is shipping?", "Three days."), ("Can I return it?", "Within 30 days.")]


async def test_a_first_turns_prompt_is_read_cold_then_warm_the_other_way_round() -> None:
    engine = FakeEngine(prefill_delay=0.05)
    await engine.start()
    warm = await read_first_prompts(
        engine, persona="You are the shop's assistant.", passages=PASSAGES
    )
    assert warm.seconds >= 0.05
    cold, second = engine.requests
    assert cold.sampling.max_tokens == second.sampling.max_tokens == 1
    system, passages, user = cold.messages
    assert system.content == "You are the shop's assistant."
    assert passages.role == "system"
    assert all(q in passages.content and a in passages.content for q, a in PASSAGES)
    assert user.content == QUESTION
    # The warm read carries the passages in the other order: a prefix cache keeps only
    # the persona, and the engine reads the rest anew.
    first, other = PASSAGES
    warm_passages = second.messages[-2].content
    assert warm_passages.index(other[0]) < warm_passages.index(first[0])
    assert warm.tokens == engine.count_chat_tokens(second.messages)


async def test_without_a_knowledge_base_the_prompt_is_the_persona_and_a_question() -> None:
    engine = FakeEngine()
    await engine.start()
    await read_first_prompts(engine, persona="Be brief.", passages=[])
    assert [m.role for m in engine.requests[0].messages] == ["system", "user"]
