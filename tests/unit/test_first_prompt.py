"""The prompt read before /ready: the embedded engine's warm-up, kept out of admission."""

from __future__ import annotations

import pytest

from kefu.engine.fake import FakeEngine
from kefu.service.first_prompt import QUESTION, read_a_first_prompt

pytestmark = pytest.mark.anyio

PASSAGES = [("How long is shipping?", "Three days."), ("Can I return it?", "Within 30 days.")]


async def test_a_first_turns_prompt_is_read_once() -> None:
    engine = FakeEngine(prefill_delay=0.05)
    await engine.start()
    seconds = await read_a_first_prompt(
        engine, persona="You are the shop's assistant.", passages=PASSAGES
    )
    assert seconds >= 0.05
    (request,) = engine.requests
    assert request.sampling.max_tokens == 1
    system, user = request.messages
    assert system.content.startswith("You are the shop's assistant.")
    assert all(q in system.content and a in system.content for q, a in PASSAGES)
    assert user.content == QUESTION


async def test_without_a_knowledge_base_the_prompt_is_the_persona_and_a_question() -> None:
    engine = FakeEngine()
    await engine.start()
    await read_a_first_prompt(engine, persona="Be brief.", passages=[])
    (request,) = engine.requests
    assert [m.role for m in request.messages] == ["system", "user"]
