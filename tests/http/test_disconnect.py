"""A client that leaves mid-stream stops generation; the /chat turn is kept anyway.

The app is driven through raw ASGI so the disconnect is real: ``receive()`` answers
``http.disconnect`` once the first token frame was sent, as uvicorn does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.types import Message

from kefu.api.sse import EventStream
from kefu.engine.fake import FakeEngine
from tests.conftest import ClientFactory
from tests.http.helpers import (
    SettingsFactory,
    asgi_post,
    make_app,
    parse_sse,
    post_scope,
    serve,
)

COMPLETIONS = "/v1/chat/completions"


def bodies(sent: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def slow_engine() -> FakeEngine:
    return FakeEngine(token_delay=0.002, reply_words=10_000)


@pytest.mark.anyio
@pytest.mark.parametrize("block_send", [False, True], ids=["idle-socket", "stuck-write"])
async def test_chat_disconnect_stops_generation_and_keeps_the_turn(
    settings_factory: SettingsFactory, block_send: bool
) -> None:
    engine = slow_engine()
    app = make_app(settings_factory(session_wait=0.5), engine)
    async with serve(app) as client:
        sent = await asgi_post(
            app,
            "/chat",
            {"message": "where is my parcel", "user_id": "u1"},
            disconnect_when=lambda body: b"event: token" in body,
            block_send=block_send,
        )
        # By the time the response has ended, the engine has stopped and the slot is free.
        assert engine.cancelled == 1
        assert engine.stats().running == 0
        assert app.state.runtime.admission.running == 0

        assert sent[0]["type"] == "http.response.start"
        assert sent[0]["status"] == 200
        events = parse_sse(bodies(sent).decode())
        assert [e.event for e in events] == ["meta", "token"]
        session_id = events[0].json()["session_id"]

        response = await client.get(f"/sessions/{session_id}")
        assert response.status_code == 200
        assert response.json()["user_id"] == "u1"
        messages = response.json()["messages"]
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", "where is my parcel"),
            ("assistant", "w0"),
        ]
        assert messages[1]["meta"]["finish_reason"] == "cancelled"
        assert messages[1]["meta"]["tier"] == "llm"

        # The session lock was released: the next turn is served without waiting it out.
        engine.reply_words = 2
        response = await client.post("/chat", json={"message": "hello", "session_id": session_id})
        assert parse_sse(response.text)[-1].event == "done"
    assert engine.cancelled == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    "block_send",
    [
        False,
        True,
    ],
    ids=["idle-socket", "stuck-write"],
)
async def test_completion_disconnect_stops_generation(
    settings_factory: SettingsFactory, block_send: bool
) -> None:
    engine = slow_engine()
    app = make_app(settings_factory(), engine)
    async with serve(app):
        sent = await asgi_post(
            app,
            COMPLETIONS,
            {"stream": True, "messages": [{"role": "user", "content": "hi"}]},
            disconnect_when=lambda body: b'"content":"w0"' in body,
            block_send=block_send,
        )
        assert app.state.runtime.admission.running == 0
        assert engine.stats().running == 0
        assert engine.cancelled == 1
    events = parse_sse(bodies(sent).decode())
    assert len(events) == 2
    assert events[-1].json()["choices"][0]["delta"] == {"content": "w0"}


async def post_and_leave(app: Starlette, path: str, body: bytes, *, whole: bool) -> list[Message]:
    """POST ``body`` through raw ASGI, then leave: after half of it (``whole`` False), or
    once it is all sent, before any response (``whole`` True)."""
    sent: list[Message] = []
    parts = [body] if whole else [body[: len(body) // 2]]
    more = not whole

    async def receive() -> Message:
        if parts:
            return {"type": "http.request", "body": parts.pop(), "more_body": more}
        if whole:
            await asyncio.sleep(0.05)  # the request is under way when the client leaves
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(post_scope(path, body), receive, send)
    return sent


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "payload", "whole"),
    [
        ("/chat", {"message": "where is my parcel"}, False),
        (COMPLETIONS, {"messages": [{"role": "user", "content": "hi"}]}, False),
        (COMPLETIONS, {"messages": [{"role": "user", "content": "hi"}]}, True),
    ],
    ids=["chat-mid-body", "v1-mid-body", "v1-before-the-reply"],
)
async def test_a_client_that_leaves_gets_499_and_no_server_error(
    settings_factory: SettingsFactory,
    caplog: pytest.LogCaptureFixture,
    path: str,
    payload: dict[str, Any],
    whole: bool,
) -> None:
    """Leaving mid-body (or before a non-streamed reply) is the client's doing: a 499,
    nothing logged as an error, nothing counted as a server error."""
    app = make_app(settings_factory(), slow_engine())
    async with serve(app) as client:
        sent = await post_and_leave(app, path, json.dumps(payload).encode(), whole=whole)
        assert sent[0]["type"] == "http.response.start"
        assert sent[0]["status"] == 499
        metrics = (await client.get("/metrics")).text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert 'status="500"' not in metrics
    assert 'status="499"' in metrics


def test_testclient_closing_the_stream_stops_generation(client_factory: ClientFactory) -> None:
    """TestClient cancels the app when a streamed response is closed early."""
    engine = slow_engine()
    with client_factory(engine=engine) as client:
        with client.stream("POST", "/chat", json={"message": "hi"}) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            assert next(lines) == "event: meta"
            session_id = next(lines).removeprefix("data: ")
            for line in lines:
                if line.startswith("event: token"):
                    break
        assert engine.cancelled == 1
        assert engine.stats().running == 0
        session_id = session_id.split('"')[3]
        deadline = time.monotonic() + 5
        while (stored := client.get(f"/sessions/{session_id}")).status_code != 200:
            assert time.monotonic() < deadline, "the cut-short turn was never stored"
            time.sleep(0.005)
        messages = stored.json()["messages"]
        assert messages[0]["content"] == "hi"
        assert messages[1]["content"].startswith("w0")
        assert messages[1]["content"] != " ".join(f"w{i}" for i in range(10_000))
        assert messages[1]["meta"]["finish_reason"] == "cancelled"


# --- EventStream on its own ------------------------------------------------------------------


class Source:
    """An async generator of frames that records whether it was closed."""

    def __init__(self, frames: list[bytes], then_wait: bool) -> None:
        self.frames = frames
        self.then_wait = then_wait
        self.closed = False
        self.sent = 0

    async def run(self) -> AsyncGenerator[bytes, None]:
        try:
            for frame in self.frames:
                self.sent += 1
                yield frame
            if self.then_wait:
                await asyncio.Event().wait()
        finally:
            self.closed = True


SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "path": "/"}


@pytest.mark.anyio
async def test_event_stream_closes_its_source_on_disconnect() -> None:
    source = Source([b"data: 1\n\n", b"data: 2\n\n"], then_wait=True)
    sent: list[Message] = []
    first_body = asyncio.Event()

    async def receive() -> Message:
        await first_body.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            first_body.set()

    await EventStream(source.run(), {"x-test": "1"})(SCOPE, receive, send)
    assert source.closed
    start = sent[0]
    assert start["type"] == "http.response.start"
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert headers[b"cache-control"] == b"no-cache"
    assert headers[b"x-test"] == b"1"
    # No end-of-body message after the client is gone.
    assert all(m.get("more_body", True) for m in sent[1:])


@pytest.mark.anyio
async def test_event_stream_ends_the_body_and_closes_the_source() -> None:
    source = Source([b"data: 1\n\n", b"data: 2\n\n"], then_wait=False)
    sent: list[Message] = []
    receive_cancelled = False

    async def receive() -> Message:
        nonlocal receive_cancelled
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            receive_cancelled = True
            raise
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await EventStream(source.run())(SCOPE, receive, send)
    assert source.closed
    assert receive_cancelled, "the disconnect watcher outlived the response"
    assert [m.get("body") for m in sent[1:]] == [b"data: 1\n\n", b"data: 2\n\n", b""]
    assert sent[-1]["more_body"] is False


@pytest.mark.anyio
async def test_event_stream_closes_its_source_when_cancelled() -> None:
    """Server shutdown cancels the response task; the source is closed all the same."""
    source = Source([b"data: 1\n\n"], then_wait=True)
    frames = source.run()
    first = await anext(frames)  # the routes pull the first event before responding
    sent: list[Message] = []
    body_sent = asyncio.Event()

    async def chained() -> AsyncGenerator[bytes, None]:
        try:
            yield first
            async for frame in frames:
                yield frame
        finally:
            await frames.aclose()

    async def receive() -> Message:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            body_sent.set()

    task = asyncio.create_task(EventStream(chained())(SCOPE, receive, send))
    await body_sent.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.closed


@pytest.mark.anyio
async def test_event_stream_survives_a_broken_socket() -> None:
    source = Source([b"data: 1\n\n", b"data: 2\n\n"], then_wait=True)

    async def receive() -> Message:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            raise ConnectionResetError("peer gone")

    await EventStream(source.run())(SCOPE, receive, send)
    assert source.closed
    assert source.sent == 1
