"""Admission control over HTTP: a full server answers 503 + Retry-After at once.

Concurrency runs in one event loop: httpx.AsyncClient on an ASGITransport, with the
app's lifespan entered by the test. The engine is gated, so "busy" is a state, not a race.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from kefu.engine.fake import FakeEngine
from tests.http.helpers import (
    GatedEngine,
    SettingsFactory,
    admission_load,
    assert_envelope,
    make_app,
    parse_sse,
    serve,
    wait_until,
)

pytestmark = pytest.mark.anyio

COMPLETIONS = "/v1/chat/completions"


def completion(content: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], **extra}


def stream_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1].data == "[DONE]"
    return "".join(
        e.json()["choices"][0]["delta"].get("content", "")
        for e in events[:-1]
        if e.json()["choices"]
    )


def assert_queue_full(response: httpx.Response) -> None:
    """/v1: the OpenAI envelope; /chat: a ``busy`` event (tests/http/test_busy.py) that
    carries the same error."""
    if response.request.url.path == "/chat":
        assert response.status_code == 503, response.text
        events = parse_sse(response.text)
        assert [e.event for e in events] == ["busy"]
        error = events[0].json()["error"]
        assert error["code"] == "queue_full"
    else:
        error = assert_envelope(response, 503, "queue_full", "service_unavailable_error")
    assert "capacity" in error["message"]
    assert response.headers["retry-after"] == "1"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (COMPLETIONS, completion("second")),
        (COMPLETIONS, completion("second", stream=True)),
        ("/chat", {"message": "second"}),
    ],
)
async def test_full_server_answers_503_at_once(
    settings_factory: SettingsFactory, path: str, body: dict[str, Any]
) -> None:
    engine = FakeEngine(token_delay=0.005, reply_words=40)
    app = make_app(settings_factory(parallel=1, max_queue=0), engine)
    async with serve(app) as client:
        busy = asyncio.create_task(client.post(COMPLETIONS, json=completion("first", stream=True)))
        await wait_until(lambda: engine.stats().running == 1)

        response = await client.post(path, json=body)
        assert_queue_full(response)

        # The busy stream is unharmed, and once it is done the server takes work again.
        assert stream_text(await busy) == " ".join(f"w{i}" for i in range(40))
        ok = await client.post(COMPLETIONS, json=completion("third"))
        assert ok.status_code == 200
    assert len(engine.requests) == 2
    assert engine.cancelled == 0


async def test_queue_holds_max_queue_then_refuses(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(parallel=1, max_queue=1), engine)
    async with serve(app) as client:
        runtime = app.state.runtime
        running = asyncio.create_task(client.post(COMPLETIONS, json=completion("one")))
        await wait_until(lambda: ("start", "one") in engine.log)
        waiting = asyncio.create_task(client.post(COMPLETIONS, json=completion("two")))
        await wait_until(lambda: runtime.admission.waiting == 1)

        ready = (await client.get("/ready")).json()
        assert admission_load(ready) == (1, 1, 1)

        assert_queue_full(await client.post(COMPLETIONS, json=completion("three")))
        assert_queue_full(await client.post("/chat", json={"message": "three"}))

        engine.release()
        first, second = await running, await waiting
        assert first.json()["choices"][0]["message"]["content"] == "fake reply to: one"
        assert second.json()["choices"][0]["message"]["content"] == "fake reply to: two"
        assert runtime.admission.running == 0
        assert runtime.admission.waiting == 0
    # First come, first served; nothing refused reached the engine.
    assert engine.log == [("start", "one"), ("end", "one"), ("start", "two"), ("end", "two")]


async def test_waiting_too_long_is_503_queue_timeout(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(parallel=1, max_queue=4, queue_timeout=0.05), engine)
    async with serve(app) as client:
        running = asyncio.create_task(client.post("/chat", json={"message": "one"}))
        await wait_until(lambda: ("start", "one") in engine.log)

        response = await client.post(COMPLETIONS, json=completion("two", stream=True))
        error = assert_envelope(response, 503, "queue_timeout", "service_unavailable_error")
        assert "0.05" in error["message"]
        assert response.headers["retry-after"] == "1"
        assert app.state.runtime.admission.waiting == 0

        engine.release()
        assert (await running).status_code == 200
        assert (await client.post(COMPLETIONS, json=completion("three"))).status_code == 200


async def test_slots_run_side_by_side(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(parallel=2, max_queue=0), engine)
    async with serve(app) as client:
        tasks = [
            asyncio.create_task(client.post(COMPLETIONS, json=completion(name)))
            for name in ("a", "b")
        ]
        await wait_until(lambda: len(engine.log) == 2)
        assert_queue_full(await client.post(COMPLETIONS, json=completion("c")))
        ready = (await client.get("/ready")).json()
        assert admission_load(ready) == (2, 0, 2)
        engine.release()
        for task in tasks:
            assert (await task).status_code == 200


async def test_refused_session_turn_stores_nothing(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(parallel=1, max_queue=0), engine)
    async with serve(app) as client:
        engine.release()
        done = parse_sse((await client.post("/chat", json={"message": "m0"})).text)[-1]
        session_id = done.json()["session_id"]
        engine.close_gate()

        other = asyncio.create_task(client.post(COMPLETIONS, json=completion("busy")))
        await wait_until(lambda: bool(engine.log))
        response = await client.post("/chat", json={"message": "m1", "session_id": session_id})
        assert_queue_full(response)
        engine.release()
        await other

        stored = (await client.get(f"/sessions/{session_id}")).json()["messages"]
        assert [m["content"] for m in stored] == ["m0", "fake reply to: m0"]
        # The refused turn released the session lock: the next one runs.
        response = await client.post("/chat", json={"message": "m2", "session_id": session_id})
        assert parse_sse(response.text)[-1].event == "done"


async def test_chat_and_v1_hand_their_prompts_length_to_admission(
    settings_factory: SettingsFactory,
) -> None:
    """At its slot a prompt is judged by the tokens it leaves to read (all of them on an
    engine that keeps no prompts), and its first token teaches admission the line."""
    engine = FakeEngine()
    app = make_app(settings_factory(parallel=2, ttft_slo=2.0), engine)
    async with serve(app) as client:
        admission = app.state.runtime.admission
        judged: list[int | None] = []
        first_token = admission.first_token

        def spy(hold: Any) -> None:
            if hold.first_token is None:
                judged.append(hold.tokens)
            first_token(hold)

        admission.first_token = spy
        chat = await client.post("/chat", json={"message": "tell me about the sea"})
        done = next(e for e in parse_sse(chat.text) if e.event == "done").json()
        v1 = await client.post(COMPLETIONS, json=completion("hello there"))
        assert v1.status_code == 200, v1.text
        assert judged == [done["usage"]["prompt_tokens"], v1.json()["usage"]["prompt_tokens"]]
        assert admission.rate.reading.samples == 2
