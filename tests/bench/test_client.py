"""One timed request against scripted servers (httpx.MockTransport) and a fake clock.

The scripted body sets the clock before each part it sends, so every timestamp the
client records is known exactly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from kefu.api.sse import sse_event
from kefu.bench.client import (
    Clients,
    Conversation,
    Target,
    TargetError,
    make_client,
    parse_url,
    preflight,
    send,
)
from kefu.bench.metrics import tpot, ttft
from kefu.bench.record import RequestRecord
from kefu.bench.workload import Message

pytestmark = pytest.mark.anyio

Part = tuple[float, bytes]  # (clock time when sent, bytes)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scripted(
    clock: FakeClock, parts: list[Part], end: float, status: int = 200
) -> Callable[[httpx.Request], httpx.Response]:
    seen: list[dict[str, Any]] = []

    async def body() -> AsyncIterator[bytes]:
        for at, data in parts:
            clock.now = at
            yield data
        clock.now = end

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(status, content=body())

    handler.seen = seen  # type: ignore[attr-defined]
    return handler


def client_for(handler: Callable[[httpx.Request], Any]) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def blank() -> RequestRecord:
    return RequestRecord(level=0, load=1, session=0, turn=1, kind="faq", sent=0.0, end=0.0)


async def ask(
    client: httpx.AsyncClient,
    conversation: Conversation,
    clock: Callable[[], float],
    text: str = "a",
    limit_s: float = 5.0,
) -> RequestRecord:
    return await send(
        client, conversation, Message(text, "faq"), blank(), clock=clock, limit_s=limit_s
    )


def openai_chunk(content: str | None = None, role: str | None = None, **extra: Any) -> bytes:
    delta = {k: v for k, v in (("role", role), ("content", content)) if v is not None}
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}], **extra}
    return sse_event(body)


async def test_openai_timestamps_skip_the_empty_first_chunk() -> None:
    clock = FakeClock()
    usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}
    handler = scripted(
        clock,
        [
            (0.10, openai_chunk("", role="assistant")),  # empty: not the first token
            (0.30, openai_chunk("Hel")),
            (0.35, openai_chunk("")),  # empty again: not a chunk
            (0.40, openai_chunk("lo")),
            (0.45, openai_chunk("!")),
            (0.50, sse_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            (0.55, sse_event(usage) + b"data: [DONE]\n\n"),
        ],
        end=0.60,
    )
    target = Target("http://bench.test", "openai", model="m")
    async with client_for(handler) as client:
        r = await ask(client, Conversation(target), clock, "Hi")
    assert r.status == "ok", r.error
    assert (r.sent, r.first_byte, r.first_content, r.end) == (0.0, 0.0, 0.30, 0.60)
    assert r.chunks == [0.30, 0.40, 0.45]
    assert r.completion_tokens == 3
    assert r.reply_chars == len("Hello!")
    assert ttft(r) == pytest.approx(0.30)
    assert tpot(r) == pytest.approx((0.60 - 0.30) / 2)
    [body] = handler.seen  # type: ignore[attr-defined]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "m"


async def test_chat_session_continues_with_its_id() -> None:
    clock = FakeClock()
    done = {
        "session_id": "s1",
        "reply": "ok",
        "tier": "llm",
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "cached_prompt_tokens": 4},
        "timings": {"ttft_ms": 3.0},
    }
    frames = [
        (0.01, sse_event({"session_id": "s1"}, event="meta")),
        (0.20, sse_event({"text": "ok"}, event="token")),
        (0.25, sse_event(done, event="done")),
    ]
    handler = scripted(clock, frames, end=0.3)
    conversation = Conversation(Target("http://bench.test"))
    async with client_for(handler) as client:
        first = await ask(client, conversation, clock)
        clock.now = 1.0
        second = await ask(client, conversation, clock, "b")
    assert first.status == second.status == "ok"
    assert first.tier == "llm"
    assert first.cached_prompt_tokens == 4
    assert first.server_timings == {"ttft_ms": 3.0}
    assert (first.first_content, first.end) == (0.20, 0.3)
    assert second.sent == 1.0
    seen = handler.seen  # type: ignore[attr-defined]
    assert seen == [{"message": "a"}, {"message": "b", "session_id": "s1"}]


async def test_http_error_status_is_an_error_with_the_envelope() -> None:
    envelope = {"error": {"message": "the queue is full", "type": "x", "code": "queue_full"}}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json=envelope)

    async with client_for(handler) as client:
        r = await ask(client, Conversation(Target("http://bench.test")), FakeClock())
    assert r.status == "error"
    assert r.http_status == 503
    assert r.error == "HTTP 503 queue_full: the queue is full"
    assert r.first_content is None


async def test_a_busy_answer_is_an_error_with_its_code() -> None:
    """kefu's /chat answers an overflow with a 503 whose body is one ``busy`` event."""
    busy = {
        "message": "We're busy right now",
        "retry_after": 3,
        "error": {"message": "the server is busy", "type": "x", "code": "overloaded"},
    }

    def handler(request: httpx.Request) -> httpx.Response:
        body = f"event: busy\ndata: {json.dumps(busy)}\n\n".encode()
        return httpx.Response(503, content=body, headers={"content-type": "text/event-stream"})

    async with client_for(handler) as client:
        r = await ask(client, Conversation(Target("http://bench.test")), FakeClock())
    assert r.status == "error"
    assert r.http_status == 503
    assert r.error == "HTTP 503 overloaded: the server is busy"


async def test_in_stream_error_and_truncated_streams() -> None:
    clock = FakeClock()
    error = {"error": {"message": "engine died", "type": "server_error", "code": None}}
    broken = scripted(
        clock,
        [(0.1, sse_event({"text": "par"}, event="token")), (0.2, sse_event(error, event="error"))],
        end=0.3,
    )
    cut = scripted(clock, [(0.1, sse_event({"text": "par"}, event="token"))], end=0.2)
    target = Target("http://bench.test")
    async with client_for(broken) as client:
        r = await ask(client, Conversation(target), clock)
    assert (r.status, r.error) == ("error", "server_error: engine died")
    assert r.chunks == [0.1]  # what arrived is kept
    async with client_for(cut) as client:
        r = await ask(client, Conversation(target), clock)
    assert r.status == "error"
    assert "ended before the reply was complete" in (r.error or "")


async def test_timeout() -> None:
    async def slow() -> AsyncIterator[bytes]:
        yield sse_event({"session_id": "s"}, event="meta")
        await asyncio.sleep(10)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=slow())

    async with client_for(handler) as client:
        r = await ask(client, Conversation(Target("http://bench.test")), FakeClock(), limit_s=0.05)
    assert r.status == "timeout"
    assert r.error == "no complete reply within 0.05 s"


async def test_connection_failure() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("All connection attempts failed", request=request)

    async with client_for(handler) as client:
        r = await ask(client, Conversation(Target("http://bench.test")), FakeClock())
    assert r.status == "error"
    assert "connection failed" in (r.error or "")


def test_openai_conversation_resends_the_last_turns() -> None:
    from kefu.bench.sse import OpenAIStream

    target = Target("http://x", "openai", model="m", system="be nice", history_turns=1)
    conversation = Conversation(target)
    for i in range(3):
        state = OpenAIStream()
        state.parts = [f"reply {i}"]
        conversation.remember(f"question {i}", state, ok=True)
    failed = OpenAIStream()
    conversation.remember("lost", failed, ok=False)  # a failed turn is not history
    body = conversation.body("question 3")
    assert body["messages"] == [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "question 2"},
        {"role": "assistant", "content": "reply 2"},
        {"role": "user", "content": "question 3"},
    ]
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.3
    no_history = Conversation(Target("http://x", "openai", model="m", history_turns=0))
    no_history.remember("q", state, ok=True)
    assert no_history.body("next")["messages"] == [{"role": "user", "content": "next"}]


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("https://shop.example/kefu/chat", "https://shop.example/kefu"),
        ("http://h:8001/v1", "http://h:8001"),
        ("http://h:8001/v1/chat/completions", "http://h:8001"),
        (" http://[::1]:8000 ", "http://[::1]:8000"),
    ],
)
def test_parse_url(url: str, base: str) -> None:
    assert parse_url(url) == base


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8000", "ftp://h", "http://", "http://h:99999", "http://h/?q=1", "nonsense"]
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(TargetError, match="--url"):
        parse_url(url)


def routes(table: dict[str, httpx.Response]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return table.get(request.url.path, httpx.Response(404))

    return client_for(handler)


async def test_preflight() -> None:
    chat = Target("http://bench.test")
    openai = Target("http://bench.test", "openai")
    async with routes({"/ready": httpx.Response(200, json={})}) as client:
        assert await preflight(client, chat) == chat
    async with routes({}) as client:
        with pytest.raises(TargetError, match=r"is it kefu.*--api openai"):
            await preflight(client, chat)
        with pytest.raises(TargetError, match="name the model with --model"):
            await preflight(client, openai)
        named = Target("http://bench.test", "openai", model="mine")
        assert await preflight(client, named) == named  # no /v1/models needed then
    async with routes({"/ready": httpx.Response(503)}) as client:
        with pytest.raises(TargetError, match="not ready: GET /ready answered 503"):
            await preflight(client, chat)
    models = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-0.5B"}, {"id": "other"}]}
    async with routes({"/v1/models": httpx.Response(200, json=models)}) as client:
        assert (await preflight(client, openai)).model == "Qwen/Qwen2.5-0.5B"


async def test_preflight_unreachable() -> None:
    from tests.e2e.support import free_port

    target = Target(f"http://127.0.0.1:{free_port()}")
    async with make_client(2.0) as client:
        with pytest.raises(TargetError, match=r"cannot reach .*connection failed"):
            await preflight(client, target)


async def test_sessions_keep_one_client_and_the_clients_share_the_load() -> None:
    """One httpx pool for 100 users spent the generator's CPU in its own bookkeeping
    (encode/httpcore#1035): sessions are spread over a few clients, each keeping its own."""
    async with Clients(timeout=2.0, shards=4) as clients:
        assert clients.for_session(7) is clients.for_session(7)
        used = {id(clients.for_session(i)) for i in range(100)}
        assert len(used) == 4
        kept = clients.for_session(0)
        assert not kept.is_closed
    assert kept.is_closed  # every client closes with the run


async def test_the_api_key_goes_with_every_request_and_a_401_says_to_give_one() -> None:
    async with Clients(timeout=2.0, shards=3, api_key="sk-bench") as clients:
        assert {clients.for_session(i).headers["authorization"] for i in range(3)} == {
            "Bearer sk-bench"
        }
    async with Clients(timeout=2.0, shards=1) as clients:
        assert "authorization" not in clients.for_session(0).headers
    refused = httpx.Response(401, json={"error": {"message": "no key"}})
    async with routes({"/v1/models": refused}) as client:
        with pytest.raises(TargetError, match=r"answered 401: .*--api-key"):
            await preflight(client, Target("http://bench.test", "openai"))
