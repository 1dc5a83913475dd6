"""An overflow on /chat is answered the way a shop would (503 + Retry-After, a ``busy``
event with the nearest FAQ entries and an offer of a human); /v1 gets the plain envelope.

The engine is gated and the admission's measured rate is set by the test, so "the
engine is too slow for the SLO" is a state, not a race."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from kefu.service.plan import Plan
from kefu.service.runtime import Runtime
from tests.http.helpers import (
    GatedEngine,
    SettingsFactory,
    asgi_post,
    assert_envelope,
    calibrate,
    make_app,
    parse_sse,
    serve,
    wait_until,
)

pytestmark = pytest.mark.anyio

# Near the demo shop's returns answers, but not one of its questions: the LLM answers it
# with those passages in its context (the test checks that premise).
ZH_QUESTION = "我家的狗把灯的电线咬坏了，保修怎么算"
QUESTION = "can delivery come to my gym on a sunday"


@asynccontextmanager
async def one_slot_with_the_fast_path(
    settings_factory: SettingsFactory, engine: GatedEngine
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    """The app on ``engine`` with one slot and a 2 s TTFT SLO, its fast path loaded."""
    settings = settings_factory(parallel=1, max_queue=8, ttft_slo=2.0, fast_path=True)
    app = make_app(settings, engine)
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        await wait_until(lambda: runtime.fast_path is not None, within=60)
        yield client, runtime


async def hold_the_only_slot(
    client: httpx.AsyncClient, runtime: Runtime
) -> asyncio.Task[httpx.Response]:
    """A slow engine, measured, with its one slot held by a /v1 request the gated engine
    keeps before its first token; the task ends once the test releases the engine."""
    slow_engine_measured(runtime)
    busy = asyncio.create_task(
        client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hold the slot"}]},
        )
    )
    await wait_until(lambda: runtime.admission.running == 1)
    return busy


def slow_engine_measured(runtime: Runtime) -> None:
    """As if requests had held their slots 10 s, their prompts (50 tokens) read in 1 s
    each, and the predictions made so far had come true."""
    runtime.admission.rate.record(10.0)
    runtime.admission.rate.reading.add(50, 1.0)
    calibrate(runtime.admission)


async def test_chat_overflow_is_a_busy_answer_with_suggestions(
    settings_factory: SettingsFactory,
) -> None:
    engine = GatedEngine()
    async with one_slot_with_the_fast_path(settings_factory, engine) as (client, runtime):
        assert runtime.fast_path is not None
        plan = await runtime.fast_path.plan(
            QUESTION, scope=runtime.fast_path.scope("default"), failures=0
        )
        assert plan.reply is None
        assert plan.passages, "the premise: the question has FAQ passages for the LLM"

        engine.release()
        first = parse_sse((await client.post("/chat", json={"message": "hello there"})).text)
        session_id = first[-1].json()["session_id"]
        engine.close_gate()

        busy = await hold_the_only_slot(client, runtime)

        # A returning customer: 1 x 10 s + 1 s to the first token > 2 s.
        response = await client.post("/chat", json={"message": QUESTION, "session_id": session_id})
        assert response.status_code == 503
        assert response.headers["retry-after"] == "9"  # 11 s predicted - 2 s SLO
        assert response.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(response.text)
        assert [e.event for e in events] == ["busy"]
        data = events[0].json()
        assert data["session_id"] == session_id
        assert data["retry_after"] == 9
        assert "9 s" in data["message"]
        assert "human" in data["message"]
        assert [s["id"] for s in data["suggestions"]] == [h.entry.id for h in plan.passages]
        assert all(s["question"] and s["answer"] for s in data["suggestions"])
        assert set(data["handoff"]) == {"agents_available", "service_hours"}
        assert data["error"]["code"] == "overloaded"
        assert data["error"]["type"] == "service_unavailable_error"

        # A first message: no session is made for it, in Chinese the answer is Chinese.
        response = await client.post("/chat", json={"message": ZH_QUESTION})
        assert response.status_code == 503
        data = parse_sse(response.text)[0].json()
        assert data["session_id"] is None
        assert "秒" in data["message"]

        # /v1: the plain envelope, the same Retry-After.
        response = await client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
        )
        error = assert_envelope(response, 503, "overloaded", "service_unavailable_error")
        assert "2 s" in error["message"]
        assert response.headers["retry-after"] == "9"

        engine.release()
        assert (await busy).status_code == 200
        # The refused turn was not stored; the session holds only its first turn.
        stored = (await client.get(f"/sessions/{session_id}")).json()["messages"]
        assert [m["content"] for m in stored if m["role"] == "user"] == ["hello there"]
        assert runtime.admission.refused["overloaded"] == 3
        assert runtime.admission.running == 0

        # The session lock was released: the next turn (engine fast again) is served.
        for _ in range(20):
            runtime.admission.rate.record(0.0)
            runtime.admission.rate.reading.add(50, 0.0)
        response = await client.post("/chat", json={"message": QUESTION, "session_id": session_id})
        assert response.status_code == 200
        assert parse_sse(response.text)[-1].event == "done"


async def test_a_refused_turn_spends_nothing_on_what_only_the_engine_needs(
    settings_factory: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused by admission, a turn gets no second look and no prompt is built: the refusal
    comes right after the first look, with its passages as the suggestions."""
    engine = GatedEngine()
    async with one_slot_with_the_fast_path(settings_factory, engine) as (client, runtime):
        fast_path = runtime.fast_path
        assert fast_path is not None
        looks: list[bool] = []
        plan = fast_path.plan

        async def spied_plan(*args: Any, **kwargs: Any) -> Plan:
            looks.append(kwargs["second_look"])
            return await plan(*args, **kwargs)

        monkeypatch.setattr(fast_path, "plan", spied_plan)

        async def no_prompt(*_: object) -> object:
            raise AssertionError("a refused turn must not build its prompt")

        busy = await hold_the_only_slot(client, runtime)
        monkeypatch.setattr(runtime, "build_prompt", no_prompt)

        response = await client.post("/chat", json={"message": QUESTION})
        assert response.status_code == 503
        data = parse_sse(response.text)[0].json()
        assert data["error"]["code"] == "overloaded"
        assert data["suggestions"], "the first look's passages"
        assert looks == [False]
        # /v1 is refused before its prompt is counted, too.
        response = await client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
        )
        assert_envelope(response, 503, "overloaded", "service_unavailable_error")
        assert runtime.admission.refused["overloaded"] == 2
        assert runtime.admission.running == 1

        monkeypatch.undo()
        engine.release()
        assert (await busy).status_code == 200
        assert runtime.admission.running == 0


async def test_a_long_prompt_is_refused_at_its_slot_as_a_busy_answer(
    settings_factory: SettingsFactory,
) -> None:
    """The door lets a turn through (a typical prompt fits behind the one being read); once
    its prompt is built, the prompt's length says its first token would come after the SLO:
    the customer gets the busy answer at once, and /v1 the envelope, rather than a reply
    that starts late."""
    engine = GatedEngine()
    app = make_app(settings_factory(parallel=2, ttft_slo=2.0), engine)
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        first = asyncio.create_task(client.post("/chat", json={"message": "hold a slot"}))
        await wait_until(lambda: runtime.admission.running == 1)  # its prompt being read
        # An engine that reads 10 ms a token, and prompts of 14 tokens typically.
        reading = runtime.admission.rate.reading
        for tokens in (10, 30):
            reading.add(tokens, tokens / 100)
            reading.observe(tokens)
        calibrate(runtime.admission)
        assert runtime.admission.refusal() is None
        long_message = "tell me about the sea and the ships on it " * 30
        response = await client.post("/chat", json={"message": long_message})
        assert response.status_code == 503, response.text
        events = parse_sse(response.text)
        assert [e.event for e in events] == ["busy"]
        error = events[0].json()["error"]
        assert error["code"] == "overloaded"
        assert "-token prompt" in error["message"]
        response = await client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": long_message}]},
        )
        error = assert_envelope(response, 503, "overloaded", "service_unavailable_error")
        assert "-token prompt" in error["message"]
        assert runtime.admission.refused["overloaded"] == 2
        assert runtime.admission.running == 1  # neither took the free slot
        engine.release()
        assert (await first).status_code == 200


async def test_a_message_on_its_second_look_counts_as_a_prompt_ahead(
    settings_factory: SettingsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message the engine could take holds a ticket through its second look: the next
    message counts it as a prompt ahead and is refused at once, without a second look of
    its own (a burst on an idle engine all queued for second looks before)."""
    engine = GatedEngine()
    async with one_slot_with_the_fast_path(settings_factory, engine) as (client, runtime):
        fast_path = runtime.fast_path
        assert fast_path is not None
        runtime.admission.rate.reading.add(50, 1.5)  # 1.5 s a prompt: two do not fit 2 s
        runtime.admission.rate.reading.observe(50)  # and prompts of 50 tokens
        calibrate(runtime.admission)
        looks: list[bool] = []
        looking = asyncio.Event()
        plan = fast_path.plan

        async def spied_plan(*args: Any, **kwargs: Any) -> Plan:
            looks.append(kwargs["second_look"])
            if kwargs["second_look"]:
                await looking.wait()
            return await plan(*args, **kwargs)

        monkeypatch.setattr(fast_path, "plan", spied_plan)
        first = asyncio.create_task(client.post("/chat", json={"message": QUESTION}))
        await wait_until(lambda: looks == [True])
        assert runtime.admission.reading == 1  # its ticket
        response = await client.post("/chat", json={"message": ZH_QUESTION})
        assert response.status_code == 503
        assert parse_sse(response.text)[0].json()["error"]["code"] == "overloaded"
        assert looks == [True, False]
        looking.set()
        engine.release()
        assert (await first).status_code == 200
        assert runtime.admission.reading == 0
        assert runtime.admission.refused["overloaded"] == 1


async def test_a_busy_answer_goes_out_whole_in_one_write(
    settings_factory: SettingsFactory,
) -> None:
    """The busy answer is the turn's only event: it is sent at once, as one body, not
    streamed frame by frame (each frame of a stream waits its turn on the event loop: in
    a burst of a hundred, ready refusals reached the wire 70-150 ms late)."""
    engine = GatedEngine()
    app = make_app(settings_factory(parallel=1, ttft_slo=2.0), engine)
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        busy = await hold_the_only_slot(client, runtime)
        sent = await asgi_post(app, "/chat", {"message": QUESTION}, disconnect_when=never)
        assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
        assert sent[0]["status"] == 503
        assert not sent[1].get("more_body", False)
        assert parse_sse(sent[1]["body"].decode())[0].event == "busy"
        engine.release()
        assert (await busy).status_code == 200


def never(_: bytes) -> bool:
    """The client stays to the end."""
    return False
