"""Server-sent events: encoding, and a response that always closes its source.

Starlette's StreamingResponse may be cancelled before it starts iterating, and
an async generator that never started cannot run its ``finally``. The turn
holds a session lock and an engine slot, so ``EventStream`` closes the source
in every case: normal end, client gone, server shutdown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from typing import Any, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from kefu.api.disconnect import wait_disconnect
from kefu.api.errors import describe
from kefu.errors import KefuError

T = TypeVar("T")

SSE_MEDIA_TYPE = "text/event-stream; charset=utf-8"
SSE_HEADERS = {
    "cache-control": "no-cache",
    "x-accel-buffering": "no",  # nginx would otherwise buffer the whole stream
}


def sse_event(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()


async def open_event_stream(
    events: AsyncGenerator[T, None],
    encode: Callable[[T], bytes],
    *,
    error_event: str | None,
    trailer: bytes = b"",
    keepalive: float | None = None,
    head: Callable[[T], tuple[int, Mapping[str, str]]] | None = None,
    last: Callable[[T], bool] | None = None,
) -> EventStream | Response:
    """Start streaming ``events``; an error before the first event keeps its HTTP status.

    A KefuError after the stream started is sent in-band, as ``error_event`` (None:
    a plain ``data:`` frame, as OpenAI does), then ``trailer``. With ``keepalive``, a
    comment frame goes out whenever the next event takes longer than that many seconds.
    ``head``: the status and extra headers the first event calls for (default 200).
    ``last``: whether a first event is the only one (a refusal's): then the whole
    response goes out at once, in the same turn of the event loop: streamed, each frame
    would wait for every other request's turn, and in a burst a refusal ready in
    milliseconds would reach the wire tens of milliseconds later.
    """
    first = await anext(events)
    status, headers = head(first) if head is not None else (200, {})
    if last is not None and last(first):
        await events.aclose()
        return Response(
            encode(first) + trailer,
            status_code=status,
            headers={**SSE_HEADERS, **headers},
            media_type=SSE_MEDIA_TYPE,
        )

    async def frames() -> AsyncGenerator[bytes, None]:
        try:
            yield encode(first)
            if keepalive is None:
                async for event in events:
                    yield encode(event)
            else:
                # Closed before ``events``: its task must stop driving them first.
                async with aclosing(with_keepalive(events, keepalive)) as waiting:
                    async for waited in waiting:
                        yield KEEPALIVE_FRAME if waited is None else encode(waited)
        except KefuError as exc:
            yield sse_event(describe(exc)[1], event=error_event)
        finally:
            await events.aclose()
        if trailer:
            yield trailer

    return EventStream(frames(), headers, status=status)


KEEPALIVE_FRAME = b": waiting\n\n"


async def with_keepalive(
    source: AsyncGenerator[T, None], every: float
) -> AsyncGenerator[T | None, None]:
    """``source``'s items (never None), and None after each ``every`` seconds without one.

    The source runs in a task of its own, so a silence never cancels it mid-step (an
    engine's first-token wait must not be interrupted by a keep-alive). Errors come
    through as raised; closing this closes the source.
    """
    queue: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue(maxsize=1)

    async def pump() -> None:
        try:
            async for item in source:
                await queue.put((True, item))
        except Exception as exc:
            await queue.put((False, exc))
            return
        await queue.put((False, None))

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                async with asyncio.timeout(every):
                    is_item, value = await queue.get()
            except TimeoutError:
                yield None
                continue
            if is_item:
                yield value
            elif value is None:
                return
            else:
                raise value
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class EventStream:
    """An ASGI response that sends already-encoded SSE frames from an async generator."""

    def __init__(
        self,
        frames: AsyncGenerator[bytes, None],
        headers: Mapping[str, str] | None = None,
        *,
        status: int = 200,
    ) -> None:
        self.frames = frames
        self.status = status
        self.headers = {**SSE_HEADERS, **(headers or {})}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        send_task = asyncio.ensure_future(self._send_all(send))
        watch_task = asyncio.ensure_future(wait_disconnect(receive))
        try:
            done, _ = await asyncio.wait(
                {send_task, watch_task}, return_when=asyncio.FIRST_COMPLETED
            )
            if send_task in done:
                send_task.result()
        finally:
            for task in (send_task, watch_task):
                task.cancel()
            await asyncio.gather(send_task, watch_task, return_exceptions=True)
            await self.frames.aclose()

    async def _send_all(self, send: Send) -> None:
        headers = [(b"content-type", SSE_MEDIA_TYPE.encode())]
        headers += [(k.encode(), v.encode()) for k, v in self.headers.items()]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        try:
            async for frame in self.frames:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
        except OSError:
            return  # the client went away mid-write
        await send({"type": "http.response.body", "body": b"", "more_body": False})
