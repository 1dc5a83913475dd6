"""Thin routes of the customer-service API: ``POST /chat`` (SSE) and the session resources."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import asdict

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kefu.api.body import read_model
from kefu.api.chat.protocol import BusyOut, ChatRequest, MemoryOut, MessageOut, SessionOut
from kefu.api.guard import owner_of
from kefu.api.sse import EventStream, open_event_stream, sse_event
from kefu.errors import NotFound
from kefu.observe.timeline import Timeline
from kefu.service.busy import TurnBusy
from kefu.service.runtime import Runtime
from kefu.service.turn import (
    TurnEvent,
    TurnHandoff,
    TurnStarted,
    TurnToken,
    routing_dict,
    run_turn,
    source_dict,
    visible,
)

KEEPALIVE_SECONDS = 15.0  # a comment frame on a silent stream, so proxies keep it open
# A turn waiting for a slow engine's first token: a comment frame every few seconds tells the
# client and any proxy that the answer is still coming.
WAITING_KEEPALIVE_SECONDS = 3.0


async def chat(request: Request) -> EventStream | Response:
    timeline: Timeline = request.state.timeline
    runtime: Runtime = request.app.state.runtime
    body = await read_model(
        request, ChatRequest, runtime.settings.max_body_bytes, runtime.settings.body_timeout
    )
    timeline.mark("parsed")
    events = run_turn(
        runtime,
        message=body.message,
        session_id=body.session_id,
        user_id=body.user_id,
        tenant=body.tenant,
        timeline=timeline,
        owner=owner_of(request),
    )
    return await open_event_stream(
        events,
        _frame,
        error_event="error",
        keepalive=WAITING_KEEPALIVE_SECONDS,
        head=_head,
        last=_is_busy,
    )


def _is_busy(event: TurnEvent) -> bool:
    """A busy answer is the turn's only event."""
    return isinstance(event, TurnBusy)


def _head(event: TurnEvent) -> tuple[int, dict[str, str]]:
    """A busy answer keeps the refusal's status, so clients and balancers see a 503."""
    if isinstance(event, TurnBusy):
        return 503, {"retry-after": str(event.retry_after)}
    return 200, {}


def _frame(event: TurnEvent) -> bytes:
    if isinstance(event, TurnBusy):
        return sse_event(BusyOut.of(event).model_dump(), event="busy")
    if isinstance(event, TurnToken):
        return sse_event({"text": event.text}, event="token")
    if isinstance(event, TurnStarted):
        return sse_event({"session_id": event.session_id}, event="meta")
    if isinstance(event, TurnHandoff):
        return sse_event(
            {
                "session_id": event.session_id,
                "reason": event.reason,
                "agents_available": event.agents_available,
                "service_hours": event.service_hours,
                "events": f"/sessions/{event.session_id}/events",
            },
            event="handoff",
        )
    usage = asdict(event.usage) | {"total_tokens": event.usage.total_tokens}
    return sse_event(
        {
            "session_id": event.session_id,
            "reply": event.reply,
            "tier": event.tier,
            "route": routing_dict(event.routing) if event.routing else None,
            "source": source_dict(event.source),
            "usage": usage,
            "timings": event.timings,
            **({"routed": event.routed} if event.routed else {}),
        },
        event="done",
    )


async def get_session(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    session_id = request.path_params["session_id"]
    await runtime.settled(session_id)
    session = await runtime.store.get_session(session_id)
    if session is None or not visible(session, owner_of(request)):
        raise NotFound(f"no session {session_id!r}", param="session_id")
    messages = await runtime.store.messages(session_id)
    memory = await runtime.store.load_memory(session_id)
    out = SessionOut(
        session_id=session.id,
        user_id=session.user_id,
        created_at=session.created_at,
        updated_at=session.updated_at,
        state=session.state,
        state_reason=session.state_reason,
        state_since=session.state_since,
        memory=MemoryOut.of(memory),
        messages=[MessageOut(**asdict(m)) for m in messages],
    )
    return Response(out.model_dump_json(), media_type="application/json")


async def delete_session(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    session_id = request.path_params["session_id"]
    async with runtime.locks.hold(session_id):  # never delete under a running turn
        await runtime.settled(session_id)  # nor before its store lands (it would resurrect it)
        session = await runtime.store.get_session(session_id)
        if session is None or not visible(session, owner_of(request)):
            raise NotFound(f"no session {session_id!r}", param="session_id")
        if not await runtime.store.delete_session(session_id):
            raise NotFound(f"no session {session_id!r}", param="session_id")
    return Response(status_code=204)


async def session(request: Request) -> Response:
    if request.method == "DELETE":
        return await delete_session(request)
    return await get_session(request)


async def session_events(request: Request) -> EventStream:
    """The customer's live stream: a human agent's replies, pushed as they are sent."""
    runtime: Runtime = request.app.state.runtime
    session_id = request.path_params["session_id"]
    await runtime.settled(session_id)
    session = await runtime.store.get_session(session_id)
    if session is None or not visible(session, owner_of(request)):
        raise NotFound(f"no session {session_id!r}", param="session_id")
    return EventStream(_session_frames(runtime, session_id))


async def _session_frames(runtime: Runtime, session_id: str) -> AsyncGenerator[bytes, None]:
    async with runtime.events.subscribe(session_id) as queue:
        yield b": connected\n\n"
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    event = await queue.get()
            except TimeoutError:
                yield b": keep-alive\n\n"  # proxies close silent connections
                continue
            yield sse_event(event.data, event=event.name)


routes = [
    Route("/chat", chat, methods=["POST"]),
    Route("/sessions/{session_id}/events", session_events, methods=["GET"]),
    # One route per path, so a 405 lists every method the resource allows.
    Route("/sessions/{session_id}", session, methods=["GET", "DELETE"]),
]
