"""Helpers for the HTTP tests: SSE parsing, engines with gates, an async in-process client."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import Message

from kefu.app import create_app
from kefu.engine.base import ChatMessage, GenerationEvent, GenerationRequest
from kefu.engine.fake import FakeEngine
from kefu.errors import EngineError
from kefu.limits.admission import Admission
from kefu.limits.outcomes import MIN_OUTCOMES, Outcome
from kefu.settings import Settings

SettingsFactory = Callable[..., Settings]

ENVELOPE_KEYS = {"message", "type", "param", "code"}


@dataclass(frozen=True)
class SseEvent:
    event: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(text: str) -> list[SseEvent]:
    """Split an SSE body into events; every frame must end with a blank line."""
    assert text.endswith("\n\n"), f"the stream does not end with a blank line: {text[-80:]!r}"
    events = []
    for frame in text.removesuffix("\n\n").split("\n\n"):
        if frame.startswith(":") and "\n" not in frame:
            continue  # a comment: ": waiting" while a slow engine answers
        event: str | None = None
        data: list[str] = []
        for line in frame.split("\n"):
            field, sep, value = line.partition(": ")
            assert sep, f"not an SSE field line: {line!r}"
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            else:
                raise AssertionError(f"unexpected SSE field {field!r}")
        assert data, f"an SSE frame without data: {frame!r}"
        events.append(SseEvent(event, "\n".join(data)))
    return events


class Response(Protocol):
    """What the assertions read of a response: httpx's (``serve``'s client) or httpx2's
    (Starlette's TestClient is built on httpx2)."""

    @property
    def status_code(self) -> int: ...

    @property
    def text(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def json(self, **kwargs: Any) -> Any: ...


def assert_envelope(
    response: Response, status: int, code: str | None = None, type_: str | None = None
) -> dict[str, Any]:
    """The response is an OpenAI error envelope with this status (and code, type)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == ENVELOPE_KEYS, error
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["type"], str)
    if code is not None:
        assert error["code"] == code, error
    if type_ is not None:
        assert error["type"] == type_, error
    return error


class GatedEngine(FakeEngine):
    """A FakeEngine whose replies wait for ``release()``; it logs when each reply starts and ends.

    Create it inside the running event loop's thread (async tests): the gate is an asyncio.Event.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.log: list[tuple[str, str]] = []
        self.seen: list[GenerationRequest] = []  # every request, also those still at the gate

    def release(self) -> None:
        self.gate.set()

    def close_gate(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.log.clear()

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        last_user = request.messages[-1].content
        self.seen.append(request)
        self.log.append(("start", last_user))
        self.entered.set()
        await self.gate.wait()
        async for event in super().generate(request):
            yield event
        self.log.append(("end", last_user))


class FailingEngine(FakeEngine):
    """A FakeEngine that fails with EngineError after ``good_tokens`` tokens."""

    def __init__(self, good_tokens: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.good_tokens = good_tokens

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        sent = 0
        async with aclosing(super().generate(request)) as events:
            async for event in events:
                if sent == self.good_tokens:
                    raise EngineError("the engine failed: decode returned -3")
                sent += 1
                yield event


class NeverReadyEngine(FakeEngine):
    """An engine that never finishes loading (start() waits on an event nobody sets)."""

    async def start(self) -> None:
        await asyncio.Event().wait()


class BrokenEngine(FakeEngine):
    """An engine whose loading fails."""

    async def start(self) -> None:
        raise RuntimeError("no model file at /nowhere.gguf")


def make_app(settings: Settings, engine: FakeEngine) -> Starlette:
    return create_app(settings, engine_factory=lambda _: engine)


@asynccontextmanager
async def serve(app: Starlette, *, ready: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """Run the app's lifespan in this event loop and give an async client on it."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            if ready:
                deadline = time.monotonic() + 10
                while (await client.get("/ready")).status_code != 200:
                    assert time.monotonic() < deadline, "the app did not become ready"
                    await asyncio.sleep(0.005)
            yield client


async def wait_until(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.002)


async def asgi_post(
    app: Starlette,
    path: str,
    payload: dict[str, Any],
    *,
    disconnect_when: Callable[[bytes], bool],
    block_send: bool = False,
) -> list[Message]:
    """POST through raw ASGI; the client disconnects once a body frame matches.

    ``block_send`` makes every send after the disconnect hang, like a socket whose
    peer is gone; otherwise sends return at once. Returns the messages the app sent.
    """
    body = json.dumps(payload).encode()
    sent: list[Message] = []
    gone = asyncio.Event()
    request_read = False

    async def receive() -> Message:
        nonlocal request_read
        if not request_read:
            request_read = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and disconnect_when(message.get("body", b"")):
            gone.set()
        if block_send and gone.is_set():
            await asyncio.Event().wait()

    await app(post_scope(path, body), receive, send)
    return sent


def post_scope(path: str, body: bytes) -> dict[str, Any]:
    """The ASGI scope of a JSON POST of ``body`` to ``path``."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }


def counted_on_the_loop(engine: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """From now on, for each prompt the engine counts: whether it was counted on the event
    loop's thread (True) or on a thread of its own, while the loop served others (False)."""
    seen: list[bool] = []
    count = engine.count_chat_tokens

    def counting(messages: Sequence[ChatMessage]) -> int:
        try:
            asyncio.get_running_loop()
            seen.append(True)
        except RuntimeError:
            seen.append(False)
        return count(messages)

    monkeypatch.setattr(engine, "count_chat_tokens", counting)
    return seen


def admission_load(ready: dict[str, Any]) -> tuple[int, int, int]:
    """/ready's admission: requests running, waiting, and whose prompts are not read yet."""
    admission = ready["admission"]
    return admission["running"], admission["waiting"], admission["reading"]


def calibrate(admission: Admission, ratio: float = 1.0, *, queued: bool = True) -> None:
    """Outcomes that came at ``ratio`` times their estimate, enough for admission to refuse
    on its predictions (a fresh server refuses nothing on them): made where estimated at
    a quarter of the SLO, missed where estimated longer."""
    near = admission.outcomes.near
    # Fixtures, not judged requests: the would-refuse confusion is left as it was.
    confusion = copy.deepcopy(admission.outcomes.confusion)
    for index in range(2 * MIN_OUTCOMES):
        missed = index % 2 == 1
        estimate = near * (1.001 if missed else 1.0)
        admission.outcomes.add(
            Outcome(
                estimate=estimate,
                predicted=estimate,
                realized=ratio * estimate,
                queued=queued,
                rule=None,
                missed=missed,
            )
        )
    admission.outcomes.confusion = confusion
