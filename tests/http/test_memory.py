"""Long conversations through /chat with a fake engine: the summary is built after the
reply, used by later prompts, never fails a turn, and goes with the session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import pytest

from kefu import demo
from kefu.engine.base import GenerationEvent, GenerationRequest
from kefu.engine.fake import FakeEngine
from kefu.errors import EngineError
from kefu.service.runtime import Runtime
from tests.http.helpers import SettingsFactory, make_app, parse_sse, serve

pytestmark = pytest.mark.anyio

SUMMARY = "customer reports a leaking kettle"
# --history-turns 2, --memory-every 2: after turn 4 turns 1-2 are folded, after 6 turns 3-4.
# A shop that reads order numbers (the demo's shape): facts keep them.
SHOP = {"order_pattern": demo.ORDER_PATTERN, "order_example": demo.ORDER_EXAMPLE}
MEMORY = {"memory": "summary", "history_turns": 2, "memory_every": 2, **SHOP}


class SummarisingEngine(FakeEngine):
    """Replies to customers like FakeEngine; a background request gets ``SUMMARY``, fails,
    or hangs, as the test says."""

    def __init__(self, summaries: str = "ok", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summaries = summaries
        self.customer_requests: list[GenerationRequest] = []
        self.background_requests: list[GenerationRequest] = []
        self.warm_requests: list[GenerationRequest] = []  # the next prompt, prefilled

    def reply_for(self, request: GenerationRequest) -> list[str]:
        if request.background:
            return SUMMARY.split()
        return super().reply_for(request)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        if request.request_id == "summary-warm":
            self.warm_requests.append(request)
        elif not request.background:
            self.customer_requests.append(request)
        else:
            self.background_requests.append(request)
            if self.summaries == "fail":
                raise EngineError("the engine failed: decode returned -3")
            if self.summaries == "hang":
                await asyncio.Event().wait()
        async for event in super().generate(request):
            yield event


async def turn(client: httpx.AsyncClient, message: str, session_id: str | None = None) -> str:
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["session_id"] = session_id
    response = await client.post("/chat", json=body)
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1].event == "done", response.text
    sid: str = events[-1].json()["session_id"]
    return sid


async def conversation(client: httpx.AsyncClient, runtime: Runtime, turns: int) -> str:
    """Turn 1 states the order and the size; the summaries of each turn are awaited."""
    session_id = await turn(client, "My kettle from order LH-100234, size M, leaks.")
    for n in range(2, turns + 1):
        await turn(client, f"question number {n}", session_id)
        await runtime.memory.idle()
    return session_id


async def test_the_summary_and_facts_reach_later_prompts_and_the_session(
    settings_factory: SettingsFactory,
) -> None:
    engine = SummarisingEngine()
    app = make_app(settings_factory(**MEMORY), engine)
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        session_id = await conversation(client, runtime, 4)
        assert len(engine.background_requests) == 1  # due after turn 4, not before
        # The next prompt's new start is prefilled twice: with the quotes code made at
        # once (persona + memory + turns 3-4), then with the model's summary.
        quoted, warm = engine.warm_requests
        # Prefilled as a customer's prompt is, not in idle steps only: the next turn would
        # read it anyway, and with every slot busy it was never read in time.
        assert not quoted.background
        assert not warm.background
        # Turn 2 quoted; the opening is not, the facts hold it verbatim already.
        assert 'The customer said earlier: "question number 2"' in quoted.messages[0].content
        assert "My kettle" in quoted.messages[0].content
        assert '"My kettle' not in quoted.messages[0].content
        assert SUMMARY in warm.messages[0].content
        assert [m.content for m in warm.messages[1:]][::2] == [
            "question number 3",
            "question number 4",
        ]
        (summary,) = engine.background_requests
        assert not summary.keep_prefix  # nobody sends the summariser's prompt again
        await turn(client, "what was my order again?", session_id)

        prompt = engine.customer_requests[-1].messages
        assert list(prompt[: len(warm.messages)]) == list(warm.messages)
        system = prompt[0].content
        assert "LH-100234" in system
        assert SUMMARY in system
        texts = [m.content for m in prompt[1:]]
        # Turns 1-2 are in the memory, 3-4 verbatim, then the message.
        assert not any("kettle" in t or "question number 2" in t for t in texts)
        assert texts[0] == "question number 3"
        assert texts[-1] == "what was my order again?"

        body = (await client.get(f"/sessions/{session_id}")).json()
        assert body["memory"]["summary"] == SUMMARY
        assert body["memory"]["covered_turn"] == 2
        assert body["memory"]["facts"]["order_numbers"] == ["LH-100234"]
        assert body["memory"]["facts"]["sizes"] == ["M"]

        metrics = (await client.get("/metrics")).text
        assert "kefu_memory_folds_total 1.0" in metrics
        assert "kefu_memory_model_summaries_total 1.0" in metrics
        assert "kefu_memory_summary_failures_total 0.0" in metrics


async def test_between_updates_the_prompt_only_grows_by_appending(
    settings_factory: SettingsFactory,
) -> None:
    engine = SummarisingEngine()
    app = make_app(settings_factory(memory="summary", history_turns=2, memory_every=3), engine)
    async with serve(app) as client:
        await conversation(client, app.state.runtime, 9)
    # Updates after turns 5 and 8: turns 6-8 extend one prompt, turn 9 starts anew.
    prompts = [r.messages for r in engine.customer_requests]
    for earlier, later in [(prompts[5], prompts[6]), (prompts[6], prompts[7])]:
        assert list(later[: len(earlier) - 1]) == list(earlier[:-1])
    assert prompts[7][1].content == "question number 4"
    assert prompts[8][1].content == "question number 7"  # turns 4-6 were folded after 8
    assert len(engine.background_requests) == 2


@pytest.mark.parametrize("summaries", ["fail", "hang"])
async def test_a_failed_or_slow_summary_never_fails_a_turn(
    settings_factory: SettingsFactory, summaries: str
) -> None:
    engine = SummarisingEngine(summaries)
    app = make_app(settings_factory(**MEMORY, summary_timeout=0.05), engine)
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        session_id = await conversation(client, runtime, 8)  # every turn got its `done`
        assert runtime.memory.failures == 3  # the model's summary after turns 4, 6 and 8
        memory = (await client.get(f"/sessions/{session_id}")).json()["memory"]
        # Code folded the turns on time anyway: facts, and the customer's own words.
        assert memory["covered_turn"] == 6
        assert memory["facts"]["order_numbers"] == ["LH-100234"]
        assert memory["summary"].startswith("The customer said earlier:")
        assert '"question number 6"' in memory["summary"]
        # Turn 8's prompt (before the fold after it): memory of 1-4 + turns 5-7 + message.
        prompt = engine.customer_requests[-1].messages
        assert len(prompt) == 1 + 3 * 2 + 1
        assert '"question number 4"' in prompt[0].content
        assert prompt[1].content == "question number 5"


async def test_a_due_fold_gives_up_the_model_summary_of_the_previous_one(
    settings_factory: SettingsFactory,
) -> None:
    engine = SummarisingEngine("hang")
    app = make_app(settings_factory(**MEMORY), engine)  # summary_timeout 60 s
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        session_id = await turn(client, "My order LH-100234 leaks.")
        for n in range(2, 7):
            await turn(client, f"question number {n}", session_id)
        # Turn 4's summary hangs (for the 60 s timeout); turn 6 made a fold due, which
        # cancels it and folds: in well under the timeout.
        for _ in range(500):
            memory = await runtime.store.load_memory(session_id)
            # The fold, and the new fold's own summary request.
            folded = memory is not None and memory.covered_turn == 4
            if folded and len(engine.background_requests) == 2:
                break
            await asyncio.sleep(0.01)
        assert memory is not None
        assert memory.covered_turn == 4
        assert len(engine.background_requests) == 2
        assert runtime.memory.failures == 0  # given up, not failed
        engine.summaries = "ok"
        await runtime.memory.close()


async def test_a_deleted_session_leaves_no_summary_behind(
    settings_factory: SettingsFactory,
) -> None:
    engine = SummarisingEngine()
    app = make_app(settings_factory(**MEMORY), engine)
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        session_id = await conversation(client, runtime, 4)
        assert await runtime.store.load_memory(session_id) is not None
        assert (await client.delete(f"/sessions/{session_id}")).status_code == 204
        assert await runtime.store.load_memory(session_id) is None

        # A summary still running when the session is deleted writes nothing.
        engine.summaries = "hang"
        session_id = await turn(client, "My order LH-100234 leaks.")
        for n in range(2, 5):
            await turn(client, f"question number {n}", session_id)
        assert runtime.memory._jobs  # the summary of turns 1-2 is in flight
        assert (await client.delete(f"/sessions/{session_id}")).status_code == 204
        engine.summaries = "ok"
        await runtime.memory.update(session_id)
        assert await runtime.store.load_memory(session_id) is None


async def test_window_mode_keeps_only_the_last_turns_and_builds_nothing(
    settings_factory: SettingsFactory,
) -> None:
    engine = SummarisingEngine()
    app = make_app(settings_factory(**(MEMORY | {"memory": "window"})), engine)
    async with serve(app) as client:
        session_id = await conversation(client, app.state.runtime, 7)
        assert engine.background_requests == []
        assert len(engine.customer_requests[-1].messages) == 1 + 2 * 2 + 1
        assert (await client.get(f"/sessions/{session_id}")).json()["memory"] is None


async def test_window_mode_drops_old_turns_in_blocks(settings_factory: SettingsFactory) -> None:
    """Sliding by one turn would change every prompt right after the persona; dropped in
    blocks of --memory-every, turns 6-8 extend one prompt, as in summary mode."""
    engine = SummarisingEngine()
    app = make_app(settings_factory(memory="window", history_turns=2, memory_every=3), engine)
    async with serve(app) as client:
        await conversation(client, app.state.runtime, 9)
    prompts = [r.messages for r in engine.customer_requests]
    for earlier, later in [(prompts[5], prompts[6]), (prompts[6], prompts[7])]:
        assert list(later[: len(earlier) - 1]) == list(earlier[:-1])
    assert prompts[5][1].content == "question number 4"
    assert len(prompts[7]) == 1 + 4 * 2 + 1  # at most window + every - 1 turns
    assert prompts[8][1].content == "question number 7"  # turns 4-6 dropped at once
    assert "LH-100234" not in prompts[8][0].content  # window mode remembers nothing


async def test_the_agent_desk_shows_the_memory_of_a_handed_off_session(
    settings_factory: SettingsFactory,
) -> None:
    engine = SummarisingEngine()
    app = make_app(settings_factory(**MEMORY), engine)
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        session_id = await conversation(client, runtime, 4)
        # The handoff itself, as the fast path would store it.
        assert await runtime.store.set_state(session_id, "handoff", "asked for a human")
        (waiting,) = (await client.get("/agent/sessions")).json()["sessions"]
    assert waiting["session_id"] == session_id
    assert waiting["memory"]["summary"] == SUMMARY
    assert waiting["memory"]["facts"]["order_numbers"] == ["LH-100234"]
