"""One finished request, reduced to the figures metrics, the dashboard and diagnose use."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any

from kefu.observe.timeline import Timeline


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """Durations in ms. ``at`` is the wall-clock time the request ended (for time axes)."""

    at: float
    request_id: str
    method: str
    route: str
    status: int
    e2e_ms: float
    tier: str | None = None
    turn: int | None = None
    error: str | None = None
    finish_reason: str | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    # Time spent in kefu itself: E2E less queue wait, prefill and decode.
    gateway_ms: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    stages_ms: dict[str, float] = field(default_factory=dict)
    # The model group of an LLM request (engine/groups.py).
    group: str | None = None
    # A pool of remote engines: the engine that answered (or failed), why, and its TTFT.
    engine: str | None = None
    route_reason: str | None = None
    upstream_ttft_ms: float | None = None
    # /chat: prompt tokens left unread to meet the TTFT SLO.
    fitted_tokens: int | None = None

    @property
    def answered(self) -> bool:
        """A request that asked for an answer (as opposed to /health, /metrics, ...)."""
        return self.tier is not None

    def as_log(self) -> dict[str, Any]:
        # Field by field: asdict deep-copies, and that cost more than the rest of a
        # request's log line (~0.1 ms of the event loop each).
        return {name: value for name in _FIELDS if (value := getattr(self, name)) is not None}


_FIELDS = tuple(f.name for f in fields(RequestRecord))


def record_from(
    timeline: Timeline, *, request_id: str, method: str, route: str, status: int
) -> RequestRecord:
    marks = timeline.marks
    end = marks.get("sent", marks.get("ended", time.perf_counter()))
    e2e = (end - marks["received"]) * 1000
    outcome = timeline.outcome
    usage = outcome.usage
    ttft = timeline.duration_ms("received", "first_output")
    queue = timeline.duration_ms("admitted", "prefill_started")
    prefill = timeline.duration_ms("prefill_started", "first_token")
    decode = timeline.duration_ms("first_token", "last_token")
    tokens = usage.completion_tokens if usage else 0
    tpot = (e2e - ttft) / (tokens - 1) if ttft is not None and tokens > 1 else None
    engine = [d for d in (queue, prefill, decode) if d is not None]
    return RequestRecord(
        at=time.time(),
        request_id=request_id,
        method=method,
        route=route,
        status=status,
        e2e_ms=round(e2e, 3),
        tier=outcome.tier,
        turn=outcome.turn,
        error=outcome.error,
        finish_reason=outcome.finish_reason,
        ttft_ms=ttft,
        tpot_ms=round(tpot, 3) if tpot is not None else None,
        queue_ms=queue,
        prefill_ms=prefill,
        decode_ms=decode,
        gateway_ms=round(e2e - sum(engine), 3) if engine else None,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=tokens,
        cached_tokens=usage.cached_prompt_tokens if usage else 0,
        stages_ms=timeline.stages_ms(),
        group=outcome.group,
        engine=outcome.engine,
        route_reason=outcome.route_reason,
        upstream_ttft_ms=prefill if outcome.engine is not None else None,
        fitted_tokens=outcome.fitted_tokens,
    )
