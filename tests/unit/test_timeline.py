"""Timeline: offsets from ``received`` in time order, derived durations, Server-Timing."""

from __future__ import annotations

import re

import pytest

from kefu.engine.base import EngineTimings
from kefu.observe.timeline import DURATIONS, Timeline

T0 = 100.0


def full_timeline() -> Timeline:
    timeline = Timeline(received=T0)
    timeline.mark("done", T0 + 0.060)  # marked out of order on purpose
    timeline.mark("admitted", T0 + 0.001)
    timeline.mark_engine(
        EngineTimings(
            queued=T0 + 0.001,
            prefill_started=T0 + 0.002,
            first_token=T0 + 0.010,
            last_token=T0 + 0.050,
        )
    )
    return timeline


def test_as_dict_offsets_ordered_by_time() -> None:
    result = full_timeline().as_dict()
    offsets = [key for key in result if key.endswith("_at_ms")]
    assert offsets == [
        "received_at_ms",
        "admitted_at_ms",
        "prefill_started_at_ms",
        "first_token_at_ms",
        "last_token_at_ms",
        "done_at_ms",
    ]
    assert result["received_at_ms"] == 0.0
    assert result["admitted_at_ms"] == pytest.approx(1.0)
    assert result["prefill_started_at_ms"] == pytest.approx(2.0)
    assert result["first_token_at_ms"] == pytest.approx(10.0)
    assert result["last_token_at_ms"] == pytest.approx(50.0)
    assert result["done_at_ms"] == pytest.approx(60.0)
    values = [result[key] for key in offsets]
    assert values == sorted(values)


def test_as_dict_derived_durations() -> None:
    result = full_timeline().as_dict()
    assert result["queue_ms"] == pytest.approx(1.0)
    assert result["prefill_ms"] == pytest.approx(8.0)
    assert result["decode_ms"] == pytest.approx(40.0)
    assert result["ttft_ms"] == pytest.approx(10.0)
    assert result["e2e_ms"] == pytest.approx(60.0)
    durations = {key for key in result if not key.endswith("_at_ms")}
    assert durations == {f"{name}_ms" for name in DURATIONS}


def test_missing_marks_give_no_duration() -> None:
    timeline = Timeline(received=T0)
    timeline.mark("done", T0 + 0.5)
    assert timeline.duration_ms("received", "done") == pytest.approx(500.0)
    assert timeline.duration_ms("received", "first_token") is None
    result = timeline.as_dict()
    assert set(result) == {"received_at_ms", "done_at_ms", "e2e_ms"}
    assert timeline.server_timing() == "e2e;dur=500.0"


def test_mark_engine_skips_stages_not_reached() -> None:
    timeline = Timeline(received=T0)
    timeline.mark_engine(EngineTimings(queued=T0 + 0.001, prefill_started=T0 + 0.002))
    assert set(timeline.marks) == {"received", "prefill_started"}
    assert "prefill_ms" not in timeline.as_dict()


def test_server_timing_format() -> None:
    header = full_timeline().server_timing()
    parts = header.split(", ")
    assert [part.split(";")[0] for part in parts] == list(DURATIONS)
    for part in parts:
        assert re.fullmatch(r"[a-z0-9_]+;dur=\d+(\.\d+)?", part), part
    assert "ttft;dur=10.0" in parts
    assert "e2e;dur=60.0" in parts


def test_server_timing_empty_without_durations() -> None:
    assert Timeline(received=T0).server_timing() == ""


def test_default_clock_is_perf_counter() -> None:
    timeline = Timeline()
    timeline.mark("done")
    result = timeline.as_dict()
    assert result["received_at_ms"] == 0.0
    assert result["e2e_ms"] >= 0.0


def test_received_zero_is_kept() -> None:
    timeline = Timeline(received=0.0)
    assert timeline.marks["received"] == 0.0
