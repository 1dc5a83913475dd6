"""OTLP/HTTP JSON export: one span per request, one child per stage, posted in batches."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest

from kefu.engine.base import Usage
from kefu.observe.otel import OtlpExporter, request_spans
from kefu.observe.records import record_from
from kefu.observe.timeline import Timeline

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def finished_timeline() -> Timeline:
    timeline = Timeline(received=100.0)
    for mark, at in (
        ("parsed", 100.001),
        ("admitted", 100.002),
        ("prefill_started", 100.010),
        ("first_token", 100.050),
        ("last_token", 100.300),
        ("sent", 100.302),
    ):
        timeline.mark(mark, at)
    timeline.outcome.tier = "llm"
    timeline.finished(Usage(prompt_tokens=40, completion_tokens=12), "stop")
    return timeline


def test_spans_nest_stages_under_the_request_and_tile_it() -> None:
    timeline = finished_timeline()
    record = record_from(timeline, request_id="abc", method="POST", route="/chat", status=200)
    root, *stages = request_spans(record, timeline)
    assert root["name"] == "POST /chat"
    assert [s["name"] for s in stages] == [
        "parse",
        "admission",
        "queue",
        "prefill",
        "decode",
        "send",
    ]
    assert {s["traceId"] for s in stages} == {root["traceId"]}
    assert {s["parentSpanId"] for s in stages} == {root["spanId"]}
    assert stages[0]["startTimeUnixNano"] == root["startTimeUnixNano"]
    assert stages[-1]["endTimeUnixNano"] == root["endTimeUnixNano"]
    for before, after in itertools.pairwise(stages):
        assert before["endTimeUnixNano"] == after["startTimeUnixNano"]
    duration = int(root["endTimeUnixNano"]) - int(root["startTimeUnixNano"])
    assert abs(duration - 302_000_000) < 1_000  # 302 ms, to the microsecond
    attributes = {a["key"]: a["value"] for a in root["attributes"]}
    assert attributes["kefu.request_id"] == {"stringValue": "abc"}
    assert attributes["gen_ai.usage.output_tokens"] == {"intValue": "12"}
    assert len(root["traceId"]) == 32
    assert len(root["spanId"]) == 16


async def test_exporter_posts_otlp_json_and_survives_a_dead_collector() -> None:
    received: list[dict[str, Any]] = []
    fail = False

    def collector(request: httpx.Request) -> httpx.Response:
        if fail:
            return httpx.Response(503)
        assert request.url.path == "/v1/traces"
        received.append(json.loads(request.content))
        return httpx.Response(200, json={})

    client = httpx.AsyncClient(transport=httpx.MockTransport(collector))
    exporter = OtlpExporter("http://collector.test", client=client, every=3600)
    timeline = finished_timeline()
    record = record_from(timeline, request_id="r1", method="POST", route="/chat", status=200)
    exporter.add(record, timeline)
    exporter.add(record, timeline)
    await exporter.flush()
    (payload,) = received
    (resource,) = payload["resourceSpans"]
    spans = resource["scopeSpans"][0]["spans"]
    assert len(spans) == 2 * 7  # two requests, each 1 + 6 stages
    assert resource["resource"]["attributes"][0]["value"] == {"stringValue": "kefu"}
    fail = True
    exporter.add(record, timeline)
    await exporter.flush()  # must not raise
    assert exporter.dropped == 7
    assert exporter.buffer == []
    await exporter.close()


async def test_the_buffer_is_bounded() -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    exporter = OtlpExporter("http://collector.test", client=client, max_buffer=10)
    timeline = finished_timeline()
    record = record_from(timeline, request_id="r", method="POST", route="/chat", status=200)
    for _ in range(5):
        exporter.add(record, timeline)
    assert len(exporter.buffer) == 14  # two requests fit; the rest are counted and dropped
    assert exporter.dropped == 3
    await client.aclose()
