"""record_from: one finished request's Timeline reduced to the figures metrics and diagnose use.

Every Timeline here is built by hand with explicit ``at`` values, so each figure
has one right answer.
"""

from __future__ import annotations

import time

import pytest

from kefu.engine.base import EngineTimings, Usage
from kefu.observe.records import RequestRecord, record_from
from kefu.observe.timeline import STAGE_OF_MARK, Timeline

T0 = 100.0

# A /chat turn: mark -> seconds after T0, in pipeline order.
CHAT_MARKS = {
    "parsed": 0.001,
    "session_locked": 0.002,
    "context_built": 0.004,
    "admitted": 0.005,
    "prefill_started": 0.105,  # 100 ms waiting for a slot
    "first_token": 0.155,  # 50 ms prefill
    "last_token": 0.455,  # 300 ms decode
    "done": 0.456,
    "sent": 0.460,
}


def chat_timeline(
    marks: dict[str, float] | None = None,
    *,
    tokens: int = 11,
    prompt_tokens: int = 40,
    cached: int = 0,
) -> Timeline:
    timeline = Timeline(received=T0)
    for name, offset in (CHAT_MARKS if marks is None else marks).items():
        timeline.mark(name, T0 + offset)
    timeline.outcome.tier = "llm"
    timeline.outcome.turn = 2
    timeline.finished(Usage(prompt_tokens, tokens, cached_prompt_tokens=cached), "stop")
    return timeline


def record(timeline: Timeline, status: int = 200, route: str = "/chat") -> RequestRecord:
    return record_from(timeline, request_id="r1", method="POST", route=route, status=status)


def test_identity_fields_are_copied() -> None:
    before = time.time()
    r = record_from(chat_timeline(), request_id="abc", method="POST", route="/chat", status=200)
    after = time.time()
    assert (r.request_id, r.method, r.route, r.status) == ("abc", "POST", "/chat", 200)
    assert before <= r.at <= after  # wall clock, for time axes


def test_e2e_runs_from_received_to_sent() -> None:
    r = record(chat_timeline())
    assert r.e2e_ms == pytest.approx(460.0)


def test_e2e_ends_at_ended_when_nothing_was_sent() -> None:
    # The client left after the last frame: the response never completed.
    marks = {k: v for k, v in CHAT_MARKS.items() if k != "sent"} | {"ended": 0.470}
    r = record(chat_timeline(marks))
    assert r.e2e_ms == pytest.approx(470.0)
    assert list(r.stages_ms)[-1] == "send"
    assert r.stages_ms["send"] == pytest.approx(14.0)


def test_sent_wins_over_ended() -> None:
    timeline = Timeline(received=T0)
    timeline.mark("sent", T0 + 0.010)
    timeline.mark("ended", T0 + 0.020)
    assert record(timeline).e2e_ms == pytest.approx(10.0)


def test_e2e_of_an_unfinished_request_runs_to_now() -> None:
    timeline = Timeline(received=time.perf_counter() - 0.5)
    r = record(timeline)
    assert 500.0 <= r.e2e_ms < 60_000.0


def test_engine_durations() -> None:
    r = record(chat_timeline())
    assert r.ttft_ms == pytest.approx(155.0)
    assert r.queue_ms == pytest.approx(100.0)
    assert r.prefill_ms == pytest.approx(50.0)
    assert r.decode_ms == pytest.approx(300.0)


def test_tpot_is_e2e_less_ttft_over_tokens_after_the_first() -> None:
    r = record(chat_timeline(tokens=11))
    assert r.tpot_ms == pytest.approx((460.0 - 155.0) / 10)


@pytest.mark.parametrize("tokens", [0, 1])
def test_tpot_needs_two_tokens(tokens: int) -> None:
    assert record(chat_timeline(tokens=tokens)).tpot_ms is None


def test_tpot_needs_a_first_token() -> None:
    marks = {k: v for k, v in CHAT_MARKS.items() if k != "first_token"}
    r = record(chat_timeline(marks, tokens=5))
    assert r.ttft_ms is None
    assert r.tpot_ms is None


def test_gateway_is_e2e_less_queue_prefill_decode() -> None:
    r = record(chat_timeline())
    assert r.gateway_ms == pytest.approx(460.0 - 100.0 - 50.0 - 300.0)
    assert r.e2e_ms - (r.queue_ms or 0) - (r.prefill_ms or 0) - (r.decode_ms or 0) == (
        pytest.approx(r.gateway_ms, abs=0.002)
    )


def test_gateway_counts_only_the_engine_stages_reached() -> None:
    # The engine reported a prefill start but no token (e.g. it failed during prefill).
    timeline = Timeline(received=T0)
    timeline.mark("admitted", T0 + 0.010)
    timeline.mark_engine(EngineTimings(queued=T0 + 0.010, prefill_started=T0 + 0.030))
    timeline.mark("ended", T0 + 0.100)
    r = record(timeline)
    assert r.queue_ms == pytest.approx(20.0)
    assert r.prefill_ms is None
    assert r.decode_ms is None
    assert r.gateway_ms == pytest.approx(80.0)


def test_no_engine_stages_no_gateway() -> None:
    timeline = Timeline(received=T0)
    timeline.mark("sent", T0 + 0.002)
    r = record(timeline, route="/health")
    assert r.gateway_ms is None
    assert r.ttft_ms is None
    assert r.queue_ms is None


def test_usage_fields() -> None:
    r = record(chat_timeline(tokens=11, prompt_tokens=40, cached=32))
    assert r.prompt_tokens == 40
    assert r.completion_tokens == 11
    assert r.cached_tokens == 32


def test_no_usage_gives_zero_tokens() -> None:
    timeline = Timeline(received=T0)
    timeline.mark("sent", T0 + 0.001)
    r = record(timeline)
    assert (r.prompt_tokens, r.completion_tokens, r.cached_tokens) == (0, 0, 0)
    assert r.finish_reason is None


def test_outcome_fields() -> None:
    timeline = chat_timeline()
    timeline.outcome.error = "engine_error"
    r = record(timeline)
    assert r.tier == "llm"
    assert r.turn == 2
    assert r.error == "engine_error"
    assert r.finish_reason == "stop"


def test_answered_means_a_tier() -> None:
    assert record(chat_timeline()).answered
    probe = Timeline(received=T0)
    probe.mark("sent", T0 + 0.001)
    assert not record(probe, route="/health").answered


def test_stages_are_named_by_stage_of_mark_in_order() -> None:
    r = record(chat_timeline())
    assert list(r.stages_ms) == [STAGE_OF_MARK[mark] for mark in CHAT_MARKS]
    assert list(r.stages_ms) == [
        "parse",
        "session",
        "context",
        "admission",
        "queue",
        "prefill",
        "decode",
        "finish",
        "send",
    ]
    expected = {"parse": 1, "session": 1, "context": 2, "admission": 1, "queue": 100}
    expected |= {"prefill": 50, "decode": 300, "finish": 1, "send": 4}
    assert r.stages_ms == pytest.approx(expected)


def test_stages_sum_to_e2e() -> None:
    r = record(chat_timeline())
    assert sum(r.stages_ms.values()) == pytest.approx(r.e2e_ms, abs=0.01)
    assert all(ms >= 0 for ms in r.stages_ms.values())


def test_stages_follow_time_not_the_order_marks_were_set() -> None:
    timeline = Timeline(received=T0)
    for name in reversed(CHAT_MARKS):  # marked last to first
        timeline.mark(name, T0 + CHAT_MARKS[name])
    r = record(timeline)
    assert list(r.stages_ms) == [STAGE_OF_MARK[mark] for mark in CHAT_MARKS]
    assert sum(r.stages_ms.values()) == pytest.approx(r.e2e_ms, abs=0.01)


def test_stages_of_a_request_that_ended_early_still_sum_to_e2e() -> None:
    timeline = Timeline(received=T0)
    timeline.mark("parsed", T0 + 0.001)
    timeline.mark("ended", T0 + 0.007)
    r = record(timeline, status=404)
    assert r.stages_ms == pytest.approx({"parse": 1.0, "send": 6.0})
    assert sum(r.stages_ms.values()) == pytest.approx(r.e2e_ms)


def test_a_mark_without_a_stage_name_keeps_its_own() -> None:
    timeline = Timeline(received=T0)
    timeline.mark("custom", T0 + 0.002)
    timeline.mark("sent", T0 + 0.003)
    assert record(timeline).stages_ms == pytest.approx({"custom": 2.0, "send": 1.0})


def test_as_log_leaves_out_what_is_unknown() -> None:
    timeline = Timeline(received=T0)
    timeline.mark("sent", T0 + 0.001)
    line = record(timeline, route="/health").as_log()
    assert "tier" not in line
    assert "ttft_ms" not in line
    assert "error" not in line
    assert line["route"] == "/health"
    assert line["stages_ms"] == pytest.approx({"send": 1.0})
    full = record(chat_timeline()).as_log()
    assert full["tier"] == "llm"
    assert full["turn"] == 2
    assert full["ttft_ms"] == pytest.approx(155.0)
