"""Where a finished request goes: metrics, the recent-requests window, the access log, traces."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from kefu.observe.metrics import LoadSnapshot, Metrics
from kefu.observe.records import RequestRecord, record_from
from kefu.observe.redis_calls import RedisCalls
from kefu.observe.timeline import Timeline
from kefu.observe.window import RecentRequests

access_log = logging.getLogger("kefu.access")

# Probes and scrapes would drown the answers; their lines go out at DEBUG.
QUIET_ROUTES = {"/health", "/ready", "/metrics", "/stats", "/dashboard", "/diagnose"}


class SpanSink(Protocol):
    def add(self, record: RequestRecord, timeline: Timeline) -> None: ...


class Observer:
    def __init__(self, load: Callable[[], LoadSnapshot], spans: SpanSink | None = None) -> None:
        self.load = load
        self.metrics = Metrics(load)
        self.recent = RecentRequests()
        self.spans = spans
        self.redis_calls = RedisCalls()  # stays empty without --redis

    def report(
        self, *, request_id: str, method: str, route: str, status: int, timeline: Timeline
    ) -> RequestRecord:
        record = record_from(
            timeline, request_id=request_id, method=method, route=route, status=status
        )
        self.metrics.observe(record)
        if record.answered:
            self.recent.add(record)
            if self.spans is not None:
                self.spans.add(record, timeline)
        level = logging.DEBUG if route in QUIET_ROUTES else logging.INFO
        if access_log.isEnabledFor(level):
            line: dict[str, Any] = {"event": "request", **record.as_log()}
            line["timings"] = timeline.as_dict()
            access_log.log(level, json.dumps(line, ensure_ascii=False))
        return record

    def sample_load(self) -> None:
        snapshot = self.load()
        self.recent.sample(running=snapshot.admitted, waiting=snapshot.waiting)
