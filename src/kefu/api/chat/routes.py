"""Thin routes of the customer-service API: ``POST /chat`` (SSE) and the session resources."""

from __future__ import annotations

from dataclasses import asdict

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kefu.api.body import read_model
from kefu.api.chat.protocol import ChatRequest, MessageOut, SessionOut
from kefu.api.sse import EventStream, open_event_stream, sse_event
from kefu.errors import NotFound
from kefu.service.runtime import Runtime
from kefu.service.timeline import Timeline
from kefu.service.turn import TurnDone, TurnEvent, TurnStarted, TurnToken, run_turn


async def chat(request: Request) -> EventStream:
    timeline: Timeline = request.state.timeline
    runtime: Runtime = request.app.state.runtime
    body = await read_model(request, ChatRequest, runtime.settings.max_body_bytes)
    timeline.mark("parsed")
    events = run_turn(
        runtime,
        message=body.message,
        session_id=body.session_id,
        user_id=body.user_id,
        timeline=timeline,
    )
    return await open_event_stream(events, _frame, error_event="error")


def _frame(event: TurnEvent) -> bytes:
    if isinstance(event, TurnToken):
        return sse_event({"text": event.text}, event="token")
    if isinstance(event, TurnStarted):
        return sse_event({"session_id": event.session_id}, event="meta")
    assert isinstance(event, TurnDone)
    usage = asdict(event.usage) | {"total_tokens": event.usage.total_tokens}
    return sse_event(
        {
            "session_id": event.session_id,
            "reply": event.reply,
            "tier": event.tier,
            "usage": usage,
            "timings": event.timings,
        },
        event="done",
    )


async def get_session(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    session_id = request.path_params["session_id"]
    await runtime.settled(session_id)
    session = await runtime.store.get_session(session_id)
    if session is None:
        raise NotFound(f"no session {session_id!r}", param="session_id")
    messages = await runtime.store.messages(session_id)
    out = SessionOut(
        session_id=session.id,
        user_id=session.user_id,
        created_at=session.created_at,
        updated_at=session.updated_at,
        messages=[MessageOut(**asdict(m)) for m in messages],
    )
    return Response(out.model_dump_json(), media_type="application/json")


async def delete_session(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    session_id = request.path_params["session_id"]
    async with runtime.locks.hold(session_id):  # never delete under a running turn
        await runtime.settled(session_id)  # nor before its store lands (it would resurrect it)
        if not await runtime.store.delete_session(session_id):
            raise NotFound(f"no session {session_id!r}", param="session_id")
    return Response(status_code=204)


async def session(request: Request) -> Response:
    if request.method == "DELETE":
        return await delete_session(request)
    return await get_session(request)


routes = [
    Route("/chat", chat, methods=["POST"]),
    # One route per path, so a 405 lists every method the resource allows.
    Route("/sessions/{session_id}", session, methods=["GET", "DELETE"]),
]
