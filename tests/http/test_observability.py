"""Observability in process, on the FakeEngine: request ids, Server-Timing, /metrics, /stats,
/diagnose, the JSON access log, and stage accounting that adds up.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from kefu.engine.base import GenerationEvent, GenerationRequest
from kefu.engine.fake import FakeEngine
from tests.conftest import ClientFactory, wait_ready
from tests.http.helpers import FailingEngine, SettingsFactory, assert_envelope, make_app, parse_sse

GENERATED_ID = re.compile(r"[0-9a-f]{16}")

CHAT_MARKS = [
    "received",
    "parsed",
    "session_locked",
    "routed",
    "context_built",
    "admitted",
    "prefill_started",
    "first_token",
    "last_token",
    "done",
]
CHAT_STAGES = [
    "parse",
    "session",
    "route",
    "context",
    "admission",
    "queue",
    "prefill",
    "decode",
    "finish",
    "send",
]
# /v1 has no session: no session_locked mark, no session stage.
V1_MARKS = [m for m in CHAT_MARKS if m not in ("session_locked", "routed")]
V1_STAGES = [s for s in CHAT_STAGES if s not in ("session", "route")]


@pytest.fixture
def slow_client(client_factory: ClientFactory) -> Iterator[TestClient]:
    """Replies take a few ms per token, so every stage has a measurable length."""
    with client_factory(engine=FakeEngine(token_delay=0.002)) as client:
        yield client


@pytest.fixture
def access_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="kefu.access")
    return caplog


def access_lines(
    caplog: pytest.LogCaptureFixture, level: int | None = None
) -> list[dict[str, Any]]:
    """The JSON access-log lines captured so far (of one level, if given)."""
    lines = []
    for record in caplog.records:
        if record.name != "kefu.access" or (level is not None and record.levelno != level):
            continue
        line: dict[str, Any] = json.loads(record.getMessage())
        assert line["event"] == "request"
        line["_level"] = record.levelno
        lines.append(line)
    return lines


def chat(client: TestClient, message: str, session_id: str | None = None) -> tuple[Any, float]:
    """One /chat turn: the response and the wall time the client measured (ms)."""
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["session_id"] = session_id
    started = time.perf_counter()
    response = client.post("/chat", json=body)
    wall_ms = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.text
    return response, wall_ms


def done_event(response: Any) -> dict[str, Any]:
    events = parse_sse(response.text)
    assert events[-1].event == "done", events
    done: dict[str, Any] = events[-1].json()
    return done


def completion(client: TestClient, *, stream: bool = False, **extra: Any) -> Any:
    body = {"messages": [{"role": "user", "content": "where is my parcel"}], "stream": stream}
    response = client.post("/v1/chat/completions", json=body | extra)
    assert response.status_code == 200, response.text
    return response


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: TestClient) -> tuple[list[str], Samples]:
    """Family names and every sample of /metrics, parsed by prometheus_client."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(response.text))
    samples: Samples = {}
    for family in families:
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return [f.name for f in families], samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


# --- request ids ---


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/health", None),
        ("GET", "/ready", None),
        ("GET", "/metrics", None),
        ("GET", "/stats", None),
        ("GET", "/diagnose", None),
        ("POST", "/chat", {"message": "hello"}),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("GET", "/v1/models", None),
        ("GET", "/sessions/nope", None),  # 404 from kefu
        ("GET", "/no/such/route", None),  # 404 from Starlette
        ("POST", "/chat", {"nonsense": 1}),  # 400
    ],
)
def test_every_response_has_a_generated_request_id(
    client: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    first = client.request(method, path, json=body)
    second = client.request(method, path, json=body)
    ids = [r.headers.get("x-request-id") for r in (first, second)]
    for request_id in ids:
        assert request_id is not None
        assert GENERATED_ID.fullmatch(request_id), request_id
    assert ids[0] != ids[1]


@pytest.mark.parametrize("incoming", ["abc", "req-1.2:3_x", "A" * 64, "0"])
def test_a_safe_incoming_request_id_is_echoed_and_logged(
    client: TestClient, access_log: pytest.LogCaptureFixture, incoming: str
) -> None:
    response = client.post("/chat", json={"message": "hello"}, headers={"x-request-id": incoming})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == incoming
    (line,) = access_lines(access_log, logging.INFO)
    assert line["request_id"] == incoming


@pytest.mark.parametrize(
    "incoming", ["has spaces", "x" * 200, "x" * 65, "semi;colon", "a/b", "", "<script>"]
)
def test_an_unsafe_incoming_request_id_is_replaced(
    client: TestClient, access_log: pytest.LogCaptureFixture, incoming: str
) -> None:
    response = client.post("/chat", json={"message": "hello"}, headers={"x-request-id": incoming})
    assert response.status_code == 200
    request_id = response.headers["x-request-id"]
    assert GENERATED_ID.fullmatch(request_id), request_id
    (line,) = access_lines(access_log, logging.INFO)
    assert line["request_id"] == request_id


# --- Server-Timing ---


def test_non_streamed_completion_has_server_timing(slow_client: TestClient) -> None:
    response = completion(slow_client)
    header = response.headers["server-timing"]
    durations = {}
    for part in header.split(", "):
        match = re.fullmatch(r"([a-z0-9_]+);dur=(\d+(?:\.\d+)?)", part)
        assert match, header
        durations[match[1]] = float(match[2])
    assert list(durations) == ["queue", "prefill", "decode", "ttft", "e2e"]
    assert durations["ttft"] <= durations["e2e"]
    assert durations["queue"] + durations["prefill"] + durations["decode"] <= durations["e2e"]
    assert durations["decode"] > 0  # four tokens, 2 ms apart


# --- /metrics ---


def test_metrics_after_one_chat_and_one_completion(client: TestClient) -> None:
    response, _ = chat(client, "hello there")
    session_id = done_event(response)["session_id"]
    completion(client)
    assert client.get(f"/sessions/{session_id}").status_code == 200

    names, samples = scrape(client)
    assert names
    assert all(name.startswith("kefu_") for name in names), names
    assert value(samples, "kefu_ttft_seconds_count", tier="llm") == 2
    assert value(samples, "kefu_e2e_seconds_count", tier="llm") == 2
    assert value(samples, "kefu_answers_total", tier="llm") == 2
    assert value(samples, "kefu_http_requests_total", route="/chat", status="200") == 1
    assert (
        value(samples, "kefu_http_requests_total", route="/v1/chat/completions", status="200") == 1
    )
    # By route template: one series for every session, never the raw id.
    assert (
        value(samples, "kefu_http_requests_total", route="/sessions/{session_id}", status="200")
        == 1
    )
    assert not any(session_id in label for (_, labels) in samples for _, label in labels)
    assert value(samples, "kefu_engine_slots") is not None
    assert value(samples, "kefu_requests_waiting") == 0
    assert value(samples, "kefu_requests_running") == 0
    assert value(samples, "kefu_ready") == 1
    # The second answer's predicted first-token time, beside what happened (the first had
    # nothing measured to predict from).
    assert value(samples, "kefu_admission_ttft_ratio_count") == 1
    assert value(samples, "kefu_admission_ttft_ratio_bucket", le="+Inf") == 1
    judged = sum(
        value(samples, "kefu_admission_judged_total", prediction=p, slo=slo) or 0
        for p in ("refuse", "admit")
        for slo in ("missed", "made")
    )
    assert judged == 1
    assert value(samples, "kefu_admission_refusals_total", code="overloaded", slot="free") == 0
    correction = value(samples, "kefu_admission_correction")
    assert correction is not None
    assert correction > 0


def test_metrics_count_tokens(client: TestClient) -> None:
    response, _ = chat(client, "one two three")
    usage = done_event(response)["usage"]
    _, samples = scrape(client)
    assert value(samples, "kefu_tokens_total", kind="prompt") == usage["prompt_tokens"]
    assert value(samples, "kefu_tokens_total", kind="completion") == usage["completion_tokens"]


def test_unknown_routes_share_one_label(client: TestClient) -> None:
    for path in ("/a", "/b/c", "/sessions"):
        assert client.get(path).status_code == 404
    _, samples = scrape(client)
    assert value(samples, "kefu_http_requests_total", route="other", status="404") == 3


def test_each_app_has_its_own_registry(client_factory: ClientFactory) -> None:
    with client_factory() as first:
        chat(first, "hello")
        _, samples = scrape(first)
        assert value(samples, "kefu_answers_total", tier="llm") == 1
    with client_factory() as second:
        _, samples = scrape(second)
        assert value(samples, "kefu_answers_total", tier="llm") is None


# --- /stats and /diagnose ---


def test_stats_reports_the_requests(client: TestClient) -> None:
    session_id = done_event(chat(client, "hello")[0])["session_id"]
    chat(client, "again", session_id)
    completion(client)
    client.get("/health")  # not an answer
    stats = client.get("/stats").json()
    assert stats["requests"] == 3
    assert stats["errors"] == 0
    assert stats["tiers"] == {"llm": 3}
    assert stats["ttft_ms"]["p50"] is not None
    assert stats["window_s"] == 300
    assert sum(row["requests"] for row in stats["series"]) == 3
    assert stats["ttft_less_queue_by_turn"].keys() == {"1", "2"}
    admission = stats["admission"]
    assert admission["predictions"]["outcomes"] == 2  # the first had nothing to go on
    none = {"total": 0, "by_code": {}, "with_free_slot": 0, "with_room": 0}
    assert admission["refusals"] == none


def test_stats_window_and_bucket(client: TestClient) -> None:
    chat(client, "hello")
    stats = client.get("/stats", params={"window": 60, "bucket": 10}).json()
    assert stats["window_s"] == 60
    assert len(stats["series"]) == 6
    assert stats["requests"] == 1


@pytest.mark.parametrize("path", ["/stats", "/diagnose"])
@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("window", "abc"),
        ("window", "0"),
        ("window", "100000"),
        ("window", "nan"),
        ("bucket", "0.1"),
        ("bucket", "x"),
    ],
)
def test_a_bad_window_is_a_400(client: TestClient, path: str, name: str, raw: str) -> None:
    response = client.get(path, params={name: raw})
    error = assert_envelope(response, 400, "invalid_request", "invalid_request_error")
    assert error["param"] == name
    assert name in error["message"]


def test_diagnose_returns_a_verdict(client: TestClient) -> None:
    for message in ("hello", "where is my parcel", "refund please"):
        chat(client, message)
    body = client.get("/diagnose").json()
    assert body["status"] in {"healthy", "unhealthy"}
    assert body["samples"] == 3
    assert body["window_s"] == 300
    checks = [f["check"] for f in body["findings"]]
    assert {"stages", "ttft", "queue", "timeouts"} <= set(checks)
    for f in body["findings"]:
        assert set(f) == {"check", "status", "message"}
        assert f["status"] in {"ok", "warn", "fail"}


def test_diagnose_with_nothing_to_judge(client: TestClient) -> None:
    body = client.get("/diagnose").json()
    assert body == {"status": "healthy", "samples": 0, "findings": [], "window_s": 300}


# --- the access log ---


def test_one_access_line_per_chat_turn(
    client: TestClient, access_log: pytest.LogCaptureFixture
) -> None:
    first, _ = chat(client, "hello")
    session_id = done_event(first)["session_id"]
    second, _ = chat(client, "and again", session_id)
    lines = access_lines(access_log)
    assert len(lines) == 2, lines
    for line, response in zip(lines, (first, second), strict=True):
        assert line["_level"] == logging.INFO
        assert line["request_id"] == response.headers["x-request-id"]
        assert line["method"] == "POST"
        assert line["route"] == "/chat"
        assert line["status"] == 200
        assert line["tier"] == "llm"
        assert line["finish_reason"] == "stop"
        assert "error" not in line
        usage = done_event(response)["usage"]
        assert line["completion_tokens"] == usage["completion_tokens"]
        assert line["prompt_tokens"] == usage["prompt_tokens"]
    assert [line["turn"] for line in lines] == [1, 2]


@pytest.mark.parametrize("path", ["/health", "/ready", "/metrics", "/stats", "/diagnose"])
def test_probes_log_at_debug_only(
    client: TestClient, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    with caplog.at_level(logging.INFO, logger="kefu.access"):
        assert client.get(path).status_code == 200
    assert access_lines(caplog) == []
    with caplog.at_level(logging.DEBUG, logger="kefu.access"):
        response = client.get(path)
    (line,) = access_lines(caplog)
    assert line["_level"] == logging.DEBUG
    assert line["route"] == path
    assert line["request_id"] == response.headers["x-request-id"]
    assert "tier" not in line


def test_unknown_session_is_a_recorded_error(
    client: TestClient, access_log: pytest.LogCaptureFixture
) -> None:
    """NotFound is raised before the stream starts: the error handler sets the outcome's error.

    run_turn has already set the tier, so the failed turn counts as a failed answer.
    """
    response = client.post("/chat", json={"message": "hello", "session_id": "nope"})
    assert_envelope(response, 404, "not_found", "not_found_error")
    (line,) = access_lines(access_log)
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["route"] == "/chat"
    assert line["status"] == 404
    assert line["error"] == "not_found"
    assert line["tier"] == "llm"
    assert "turn" not in line
    assert "ttft_ms" not in line
    assert sum(line["stages_ms"].values()) == pytest.approx(line["e2e_ms"], abs=1.0)

    _, samples = scrape(client)
    assert value(samples, "kefu_errors_total", code="not_found") == 1
    assert value(samples, "kefu_answers_total", tier="llm") is None
    assert value(samples, "kefu_http_requests_total", route="/chat", status="404") == 1
    stats = client.get("/stats").json()
    assert stats["requests"] == 1
    assert stats["errors"] == 1
    assert stats["errors_by_code"] == {"not_found": 1}
    assert stats["tiers"] == {}


def test_a_bad_body_is_not_an_answer(
    client: TestClient, access_log: pytest.LogCaptureFixture
) -> None:
    response = client.post("/chat", json={"nonsense": 1})
    assert_envelope(response, 400)
    (line,) = access_lines(access_log)
    assert line["status"] == 400
    assert line["error"] == "invalid_request"
    assert "tier" not in line
    assert client.get("/stats").json()["requests"] == 0


def test_an_engine_failure_mid_stream_is_a_recorded_error(
    client_factory: ClientFactory, access_log: pytest.LogCaptureFixture
) -> None:
    with client_factory(engine=FailingEngine(good_tokens=1)) as client:
        response = client.post("/chat", json={"message": "hello there"})
        assert response.status_code == 200  # the stream had started
        assert [e.event for e in parse_sse(response.text)][-1] == "error"
        (line,) = access_lines(access_log)
        assert line["status"] == 200
        assert line["error"] == "engine_error"
        _, samples = scrape(client)
        assert value(samples, "kefu_errors_total", code="engine_error") == 1
        assert value(samples, "kefu_answers_total", tier="llm") is None


class CrashingEngine(FakeEngine):
    """A bug, not a KefuError: the engine raises something unexpected."""

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        raise RuntimeError("a bug in the engine")
        yield  # pragma: no cover  (makes this an async generator)


@pytest.fixture
def crashing_client(settings_factory: SettingsFactory) -> Iterator[TestClient]:
    app = make_app(settings_factory(), CrashingEngine())
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client)
        yield client


def test_an_unexpected_500_has_a_request_id(
    crashing_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.CRITICAL, logger="kefu.api"):  # the traceback is expected
        response = crashing_client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
        )
    assert_envelope(response, 500, "internal_error", "server_error")
    assert GENERATED_ID.fullmatch(response.headers.get("x-request-id", "")), response.headers


def test_an_unexpected_failure_is_recorded_as_an_error(
    crashing_client: TestClient, access_log: pytest.LogCaptureFixture
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logging.getLogger("kefu.api"), "disabled", True)
        response = crashing_client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
        )
    assert response.status_code == 500
    (line,) = access_lines(access_log)
    assert line["status"] == 500
    assert line["error"] == "internal_error"
    _, samples = scrape(crashing_client)
    assert value(samples, "kefu_answers_total", tier="llm") is None
    assert value(samples, "kefu_errors_total", code="internal_error") == 1
    assert crashing_client.get("/stats").json()["errors"] == 1


# --- the key test: a request's stages are ordered and add up to its E2E within 1 ms ---


def assert_stage_accounting(
    line: dict[str, Any],
    timings: dict[str, float],
    marks: list[str],
    stages: list[str],
    wall_ms: float,
) -> None:
    # (a) the marks are reached in pipeline order
    offsets = [timings[f"{mark}_at_ms"] for mark in marks]
    assert offsets[0] == 0.0
    assert offsets == sorted(offsets), dict(zip(marks, offsets, strict=True))
    # (b) stages: none negative, in pipeline order, adding up to E2E
    stages_ms: dict[str, float] = line["stages_ms"]
    assert list(stages_ms) == stages
    assert all(ms >= 0 for ms in stages_ms.values()), stages_ms
    assert sum(stages_ms.values()) == pytest.approx(line["e2e_ms"], abs=1.0)
    # E2E ends when the last byte was handed over: at or after "done"
    assert line["e2e_ms"] >= offsets[-1]
    # (c) the server's E2E fits inside what the client measured
    assert line["e2e_ms"] <= wall_ms


def test_chat_stages_are_ordered_and_add_up_to_e2e(
    slow_client: TestClient, access_log: pytest.LogCaptureFixture
) -> None:
    session_id = None
    for turn in (1, 2, 3):
        response, wall_ms = chat(slow_client, f"question number {turn}", session_id)
        done = done_event(response)
        session_id = done["session_id"]
        line = access_lines(access_log)[-1]
        assert line["request_id"] == response.headers["x-request-id"]
        assert line["turn"] == turn
        assert_stage_accounting(line, done["timings"], CHAT_MARKS, CHAT_STAGES, wall_ms)
        # the done event and the access log describe the same timeline
        for mark in CHAT_MARKS:
            key = f"{mark}_at_ms"
            assert line["timings"][key] == done["timings"][key]
        assert line["timings"]["sent_at_ms"] == pytest.approx(line["e2e_ms"], abs=0.002)
        assert line["ttft_ms"] == done["timings"]["ttft_ms"]


def test_streamed_completion_stages_are_ordered_and_add_up_to_e2e(
    slow_client: TestClient, access_log: pytest.LogCaptureFixture
) -> None:
    started = time.perf_counter()
    response = completion(slow_client, stream=True, stream_options={"include_usage": True})
    wall_ms = (time.perf_counter() - started) * 1000
    events = parse_sse(response.text)
    assert events[-1].data == "[DONE]"
    usage = events[-2].json()["usage"]
    (line,) = access_lines(access_log)
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["route"] == "/v1/chat/completions"
    assert line["tier"] == "llm"
    assert line["completion_tokens"] == usage["completion_tokens"]
    assert "turn" not in line
    marks = [*V1_MARKS, "sent"]
    assert_stage_accounting(line, line["timings"], marks, V1_STAGES, wall_ms)


def test_non_streamed_completion_stages_are_ordered_and_add_up_to_e2e(
    slow_client: TestClient, access_log: pytest.LogCaptureFixture
) -> None:
    started = time.perf_counter()
    response = completion(slow_client)
    wall_ms = (time.perf_counter() - started) * 1000
    (line,) = access_lines(access_log)
    assert line["request_id"] == response.headers["x-request-id"]
    assert_stage_accounting(line, line["timings"], [*V1_MARKS, "sent"], V1_STAGES, wall_ms)
    assert f"e2e;dur={line['timings']['e2e_ms']}" in response.headers["server-timing"]
