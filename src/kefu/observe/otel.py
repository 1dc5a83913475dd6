"""Optional OpenTelemetry traces: one span per request, a child span per stage, OTLP/HTTP JSON.

Off unless ``--otel-endpoint`` is set. Spans are buffered and posted in the
background; a collector that is down costs dropped spans and one warning, never
a slower request. No SDK dependency: OTLP's JSON encoding is small.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from typing import Any

import httpx

from kefu.observe.records import RequestRecord
from kefu.observe.timeline import STAGE_OF_MARK, Timeline

log = logging.getLogger("kefu.otel")

SPAN_KIND_SERVER = 2
SPAN_KIND_INTERNAL = 1
STATUS_OK, STATUS_ERROR = 1, 2


def _attr(key: str, value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


def request_spans(record: RequestRecord, timeline: Timeline) -> list[dict[str, Any]]:
    """The request's span and one child per stage, timed on the wall clock."""
    ordered = timeline.ordered()
    end_perf = ordered[-1][1]

    def unix_nano(perf: float) -> str:
        return str(int((record.at - (end_perf - perf)) * 1e9))

    trace_id = secrets.token_hex(16)
    root_id = secrets.token_hex(8)
    attributes = [
        _attr("http.request.method", record.method),
        _attr("http.route", record.route),
        _attr("http.response.status_code", record.status),
        _attr("kefu.request_id", record.request_id),
        _attr("gen_ai.usage.input_tokens", record.prompt_tokens),
        _attr("gen_ai.usage.output_tokens", record.completion_tokens),
    ]
    attributes += [
        _attr(f"kefu.{k}", v)
        for k, v in (("tier", record.tier), ("turn", record.turn), ("error", record.error))
        if v
    ]
    spans = [
        {
            "traceId": trace_id,
            "spanId": root_id,
            "name": f"{record.method} {record.route}",
            "kind": SPAN_KIND_SERVER,
            "startTimeUnixNano": unix_nano(ordered[0][1]),
            "endTimeUnixNano": unix_nano(end_perf),
            "attributes": attributes,
            "status": {"code": STATUS_ERROR if record.error or record.status >= 500 else STATUS_OK},
        }
    ]
    for (_, start), (mark, end) in itertools.pairwise(ordered):
        spans.append(
            {
                "traceId": trace_id,
                "spanId": secrets.token_hex(8),
                "parentSpanId": root_id,
                "name": STAGE_OF_MARK.get(mark, mark),
                "kind": SPAN_KIND_INTERNAL,
                "startTimeUnixNano": unix_nano(start),
                "endTimeUnixNano": unix_nano(end),
            }
        )
    return spans


class OtlpExporter:
    def __init__(
        self,
        endpoint: str,
        *,
        client: httpx.AsyncClient | None = None,
        every: float = 2.0,
        max_buffer: int = 10_000,
    ) -> None:
        self.url = endpoint.rstrip("/") + "/v1/traces"
        self.client = client or httpx.AsyncClient(timeout=5)
        self.every = every
        self.max_buffer = max_buffer
        self.buffer: list[dict[str, Any]] = []
        self.dropped = 0
        self._task: asyncio.Task[None] | None = None
        self._warned = False

    def add(self, record: RequestRecord, timeline: Timeline) -> None:
        if len(self.buffer) >= self.max_buffer:
            self.dropped += 1  # bounded: a dead collector must not grow memory
            return
        self.buffer.extend(request_spans(record, timeline))

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()
        await self.client.aclose()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            await self.flush()

    async def flush(self) -> None:
        if not self.buffer:
            return
        spans, self.buffer = self.buffer, []
        payload = {
            "resourceSpans": [
                {
                    "resource": {"attributes": [_attr("service.name", "kefu")]},
                    "scopeSpans": [{"scope": {"name": "kefu"}, "spans": spans}],
                }
            ]
        }
        try:
            response = await self.client.post(self.url, json=payload)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            self.dropped += len(spans)
            if not self._warned:  # once: a missing collector is not worth a log flood
                log.warning("cannot send traces to %s: %s", self.url, exc)
                self._warned = True
