"""Liveness and readiness probes."""

from __future__ import annotations

from dataclasses import asdict

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kefu.service.runtime import Runtime


async def health(request: Request) -> JSONResponse:
    """The process is up and its event loop answers; says nothing about the model."""
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> JSONResponse:
    """200 once the model is loaded and warmed up; 503 (with Retry-After) before that."""
    runtime: Runtime = request.app.state.runtime
    body = {
        "status": "ready" if runtime.ready else "failed" if runtime.load_error else "loading",
        "error": runtime.load_error,
        "model": runtime.engine.model_id,
        "engine": asdict(runtime.engine.stats()),
        "admission": {"running": runtime.admission.running, "waiting": runtime.admission.waiting},
    }
    if runtime.ready:
        return JSONResponse(body)
    return JSONResponse(body, status_code=503, headers={"retry-after": "2"})


routes = [
    Route("/health", health, methods=["GET"]),
    Route("/ready", ready, methods=["GET"]),
]
