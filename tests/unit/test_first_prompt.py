"""The prompt read before /ready: admission's first measure of the engine."""

from __future__ import annotations

import pytest

from kefu.engine.fake import FakeEngine
from kefu.limits.admission import Admission
from kefu.service.first_prompt import QUESTION, time_a_first_prompt

pytestmark = pytest.mark.anyio

PASSAGES = [("How long is shipping?", "Three days."), ("Can I return it?", "Within 30 days.")]


async def test_a_first_turns_prompt_is_read_and_timed_for_admission() -> None:
    engine = FakeEngine(prefill_delay=0.05)
    await engine.start()
    admission = Admission(slots=8, max_waiting=64, timeout=10, ttft_slo=2.0)
    assert admission.predicted_ttft() is None  # a fresh server knows nothing of its engine
    seconds = await time_a_first_prompt(
        engine, admission, persona="You are the shop's assistant.", passages=PASSAGES
    )
    assert seconds >= 0.05
    assert admission.rate.prefill.value == seconds  # the estimate's first sample
    assert admission.rate.completed == 0  # a one-token reply says nothing of service time
    (request,) = engine.requests
    assert request.sampling.max_tokens == 1
    system, user = request.messages
    assert system.content.startswith("You are the shop's assistant.")
    assert all(q in system.content and a in system.content for q, a in PASSAGES)
    assert user.content == QUESTION


async def test_without_a_knowledge_base_the_prompt_is_the_persona_and_a_question() -> None:
    engine = FakeEngine()
    await engine.start()
    admission = Admission(slots=1, max_waiting=0, timeout=10, ttft_slo=2.0)
    await time_a_first_prompt(engine, admission, persona="Be brief.", passages=[])
    (request,) = engine.requests
    assert [m.role for m in request.messages] == ["system", "user"]
    assert admission.rate.prefill.value is not None
