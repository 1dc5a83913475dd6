"""Thin routes for human agents: list waiting sessions, read one, claim, reply, hand back."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kefu.api.agent.protocol import (
    AgentReplyIn,
    AgentReplyOut,
    ClaimIn,
    ClaimOut,
    WaitingSessionOut,
    WaitingSessionsOut,
)
from kefu.api.body import read_model
from kefu.api.chat.protocol import MemoryOut
from kefu.api.chat.routes import get_session
from kefu.service.agents import agent_reply, claim, release, waiting_sessions
from kefu.service.runtime import Runtime


async def list_waiting(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    waiting = await waiting_sessions(runtime)
    out = WaitingSessionsOut(
        sessions=[
            WaitingSessionOut(
                session_id=w.session.id,
                memory=MemoryOut.of(w.memory),
                user_id=w.session.user_id,
                reason=w.session.state_reason,
                since=w.session.state_since,
                waiting_seconds=w.waiting_seconds,
                last_message=w.last_customer_message,
                claimed_by=w.claimed_by,
            )
            for w in waiting
        ]
    )
    return Response(out.model_dump_json(), media_type="application/json")


async def reply(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    session_id = request.path_params["session_id"]
    body = await read_model(
        request, AgentReplyIn, runtime.settings.max_body_bytes, runtime.settings.body_timeout
    )
    message, delivered = await agent_reply(runtime, session_id, body.message, body.agent)
    out = AgentReplyOut(
        session_id=session_id,
        turn=message.turn,
        created_at=message.created_at,
        delivered=delivered,
    )
    return Response(out.model_dump_json(), status_code=201, media_type="application/json")


async def take(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    session_id = request.path_params["session_id"]
    body = await read_model(
        request, ClaimIn, runtime.settings.max_body_bytes, runtime.settings.body_timeout
    )
    await claim(runtime, session_id, body.agent)
    out = ClaimOut(session_id=session_id, agent=body.agent)
    return Response(out.model_dump_json(), media_type="application/json")


async def hand_back(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    await release(runtime, request.path_params["session_id"])
    return Response(status_code=204)


routes = [
    Route("/agent/sessions", list_waiting, methods=["GET"]),
    Route("/agent/sessions/{session_id}", get_session, methods=["GET"]),
    Route("/agent/sessions/{session_id}/claim", take, methods=["POST"]),
    Route("/agent/sessions/{session_id}/reply", reply, methods=["POST"]),
    Route("/agent/sessions/{session_id}/release", hand_back, methods=["POST"]),
]
