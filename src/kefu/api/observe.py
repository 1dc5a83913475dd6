"""Thin routes of observability: /metrics, /stats, /diagnose and the dashboard page."""

from __future__ import annotations

import time
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from kefu.errors import InvalidRequest
from kefu.observe.diagnose import diagnose
from kefu.observe.engines import window_rows, with_live
from kefu.observe.metrics import CONTENT_TYPE
from kefu.service.runtime import Runtime

MAX_WINDOW_S = 900


def _seconds(request: Request, name: str, default: float, low: float, high: float) -> float:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidRequest(f"'{name}' must be a number of seconds", param=name) from None
    if not low <= value <= high:
        raise InvalidRequest(f"'{name}' must be between {low:g} and {high:g}", param=name)
    return value


def _summary(request: Request) -> dict[str, object]:
    runtime: Runtime = request.app.state.runtime
    window = _seconds(request, "window", 300, 1, MAX_WINDOW_S)
    bucket = _seconds(request, "bucket", max(window / 60, 1), 0.5, window)
    summary = runtime.observer.recent.summary(window=window, bucket=bucket)
    summary["admission"] = runtime.admission.report(since=time.time() - window)
    redis = runtime.observer.redis_calls.summary(window)
    if redis is not None:
        summary["redis"] = redis
    live = runtime.engine.stats().engines
    if live:  # a pool of remote engines: a row each
        since = time.time() - window
        summary |= with_live(window_rows(runtime.observer.recent.since(since)), live)
    return summary


async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    return Response(runtime.observer.metrics.exposition(), media_type=CONTENT_TYPE)


async def stats(request: Request) -> JSONResponse:
    """The recent window summarised: percentiles, shares, tier mix, a time series."""
    return JSONResponse(_summary(request))


async def diagnosis(request: Request) -> JSONResponse:
    summary = _summary(request)
    return JSONResponse(diagnose(summary).as_dict() | {"window_s": summary["window_s"]})


async def dashboard(request: Request) -> HTMLResponse:
    page = files("kefu.web").joinpath("dashboard.html").read_text(encoding="utf-8")
    return HTMLResponse(page)


routes = [
    Route("/metrics", metrics, methods=["GET"]),
    Route("/stats", stats, methods=["GET"]),
    Route("/diagnose", diagnosis, methods=["GET"]),
    Route("/dashboard", dashboard, methods=["GET"]),
]
