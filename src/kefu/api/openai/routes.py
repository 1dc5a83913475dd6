"""Thin routes of the OpenAI-compatible surface: parse, call serving, encode."""

from __future__ import annotations

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kefu.api.body import read_model
from kefu.api.disconnect import unless_disconnected
from kefu.api.openai.protocol import ChatCompletionChunk, ChatCompletionRequest
from kefu.api.openai.serving import create_completion, list_models, stream_completion
from kefu.api.sse import EventStream, open_event_stream, sse_event
from kefu.observe.timeline import Timeline
from kefu.service.runtime import Runtime


def json_response(model: BaseModel, headers: dict[str, str] | None = None) -> Response:
    return Response(model.model_dump_json(), media_type="application/json", headers=headers)


async def models(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    return json_response(list_models(runtime))


async def chat_completions(request: Request) -> Response | EventStream:
    timeline: Timeline = request.state.timeline
    runtime: Runtime = request.app.state.runtime
    body = await read_model(
        request,
        ChatCompletionRequest,
        runtime.settings.max_body_bytes,
        runtime.settings.body_timeout,
    )
    timeline.mark("parsed")
    if not body.stream:
        completion = await unless_disconnected(
            request.receive, create_completion(runtime, body, timeline)
        )
        return json_response(completion, {"server-timing": timeline.server_timing()})
    chunks = stream_completion(runtime, body, timeline)
    return await open_event_stream(
        chunks, _chunk_frame, error_event=None, trailer=b"data: [DONE]\n\n"
    )


def _chunk_frame(chunk: ChatCompletionChunk) -> bytes:
    return sse_event(chunk.model_dump_json(exclude_none=True))


routes = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
]
