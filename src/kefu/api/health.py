"""Liveness and readiness probes."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kefu.limits.admission import Admission
from kefu.limits.rates import PromptReading
from kefu.service.runtime import Runtime


async def health(request: Request) -> JSONResponse:
    """The process is up and its event loop answers; says nothing about the model."""
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> JSONResponse:
    """200 once the model is warmed up and the knowledge base open; 503 (Retry-After) before."""
    runtime: Runtime = request.app.state.runtime
    error = runtime.load_error or runtime.fast_path_error
    body = {
        "status": "ready" if runtime.serving else "failed" if error else "loading",
        "error": error,
        "model": runtime.engine.model_id,
        "engine": asdict(runtime.engine.stats()),
        "admission": admission_state(runtime.admission),
        # What requests hold while they run: all back to idle levels once they are over
        # (benchmarks/disconnect_storm.py and soak.py watch these).
        "held": {
            "session_locks": len(runtime.locks),
            "pending_writes": len(runtime.pending_writes),
            "background_tasks": len(runtime.background),
            "tasks": len(asyncio.all_tasks()),
        },
    }
    if len(runtime.groups) > 1:  # model groups: each has its own admission
        body["groups"] = {g.name: admission_state(g.admission) for g in runtime.groups}
    fast_path = runtime.fast_path
    if fast_path is not None:
        body["knowledge_base"] = {
            "entries": await fast_path.read_kb(len),
            "decision": fast_path.keeper.status(),
            "judge": None if fast_path.judge is None else fast_path.judge.status(),
        }
    if runtime.serving:
        return JSONResponse(body)
    return JSONResponse(body, status_code=503, headers={"retry-after": "2"})


routes = [
    Route("/health", health, methods=["GET"]),
    Route("/ready", ready, methods=["GET"]),
]


def admission_state(admission: Admission) -> dict[str, object]:
    """What an admission holds now, measures, predicted against what happened, refused."""
    return {
        "running": admission.running,
        "waiting": admission.waiting,
        "reading": admission.reading,
        "prompt_reading": prompt_reading(admission.rate.reading),
        "refused": dict(admission.refused),
    } | admission.report()


def prompt_reading(reading: PromptReading) -> dict[str, float]:
    fixed, per_token = reading.line()
    return {
        "samples": reading.samples,
        "fixed_s": round(fixed, 4),
        "per_token_ms": round(per_token * 1000, 4),
    }
