"""The metric maths on synthetic timestamps: every definition in kefu.bench.metrics."""

from __future__ import annotations

import math

import pytest

from kefu.bench.metrics import (
    Dist,
    e2e,
    itl,
    meets_slo,
    percentile,
    slo_value,
    split,
    summarize,
    tier_of,
    tokens,
    tpot,
    ttft,
    turn_of,
    window,
)
from kefu.bench.slo import Slo
from tests.bench.conftest import record


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 90) == pytest.approx(3.7)
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 99) == 7.0


def test_percentile_of_nothing_is_nan_and_nans_are_left_out() -> None:
    assert math.isnan(percentile([], 50))
    assert math.isnan(percentile([math.nan], 50))
    assert percentile([1.0, math.nan, 3.0], 50) == 2.0


def test_percentile_with_infinitely_late_failures() -> None:
    assert percentile([1.0, math.inf], 50) == math.inf
    assert percentile([1.0, 1.0, 1.0, math.inf], 50) == 1.0
    assert percentile([math.inf, math.inf], 50) == math.inf
    # 1 failure in 200: p99 stays finite; 1 in 50: p99 is infinite.
    assert math.isfinite(percentile([0.1] * 199 + [math.inf], 99))
    assert percentile([0.1] * 49 + [math.inf], 99) == math.inf


def test_ttft_is_first_non_empty_content_not_first_byte() -> None:
    r = record(sent=10.0, first=10.25, end=11.0)
    r.first_byte = 10.05  # headers came early; TTFT ignores them
    assert ttft(r) == pytest.approx(0.25)
    assert e2e(r) == pytest.approx(1.0)


def test_empty_reply_has_no_ttft_but_an_e2e_and_meets_ttft_slo_by_its_end() -> None:
    r = record(sent=0.0, first=None, end=0.4)
    assert ttft(r) is None
    assert tpot(r) is None
    assert e2e(r) == pytest.approx(0.4)
    assert slo_value(r, "ttft") == pytest.approx(0.4)
    summary = summarize([r], Slo(ttft=0.5))
    assert summary.empty == 1
    assert summary.ttft.n == 0
    assert summary.e2e.n == 1


def test_tpot_excludes_ttft_and_uses_the_server_token_count() -> None:
    r = record(sent=0.0, first=0.2, chunks=[0.2, 0.5, 1.2], end=1.2, tokens=11)
    assert tpot(r) == pytest.approx((1.2 - 0.2) / 10)
    assert tokens(r) == 11


def test_tpot_falls_back_to_content_chunks_without_usage() -> None:
    r = record(sent=0.0, first=0.2, chunks=[0.2, 0.5, 0.8], end=1.0, tokens=None)
    assert tokens(r) == 3
    assert tpot(r) == pytest.approx((1.0 - 0.2) / 2)


def test_tpot_is_undefined_for_one_token() -> None:
    assert tpot(record(sent=0.0, first=0.2, end=0.3, tokens=1)) is None
    assert tpot(record(sent=0.0, first=0.2, end=0.3, tokens=None)) is None  # one chunk
    one = record(sent=0.0, first=0.2, end=0.3, tokens=1)
    assert slo_value(one, "tpot") == 0.0  # meets any TPOT bound
    assert summarize([one], Slo()).tpot.n == 0


def test_itl_is_the_gaps_between_successive_chunks() -> None:
    r = record(sent=0.0, first=0.2, chunks=[0.2, 0.3, 0.45, 0.5], end=0.6)
    assert itl(r) == pytest.approx([0.1, 0.15, 0.05])
    assert itl(record(first=0.2)) == []
    summary = summarize([r, record(sent=0.0, first=0.1, chunks=[0.1, 0.3], end=0.4)], Slo())
    assert summary.itl.n == 4  # pooled over requests
    assert summary.itl.p50 == pytest.approx(0.125)


def test_failures_have_no_latency_and_are_counted() -> None:
    records = [
        record(sent=0.0, first=0.1, end=0.5),
        record(sent=0.0, first=0.1, end=0.5),
        record(sent=0.1, end=0.2, status="error"),
        record(sent=0.2, end=3.0, status="timeout"),
    ]
    for failed in records[2:]:
        assert ttft(failed) is None
        assert e2e(failed) is None
        assert itl(failed) == []
        assert slo_value(failed, "ttft") == math.inf
    s = summarize(records, Slo(ttft=1.0))
    assert (s.requests, s.ok, s.errors, s.timeouts) == (4, 2, 1, 1)
    assert s.error_rate == 0.25
    assert s.timeout_rate == 0.25
    assert s.ttft.n == 2
    assert s.slo_p99["ttft"] == math.inf
    assert not s.meets(Slo(ttft=1.0))


def test_throughput_and_goodput_over_the_window() -> None:
    slo = Slo(ttft=0.5, e2e=2.0)
    records = [
        record(sent=0.0, first=0.1, chunks=[0.1, 0.2], end=1.0, tokens=10),  # good
        record(sent=1.0, first=1.2, end=2.0, tokens=5),  # good
        record(sent=2.0, first=2.9, end=3.0, tokens=5),  # TTFT 0.9: misses
        record(sent=2.0, first=2.1, end=4.0, tokens=5),  # E2E 2.0: meets (bound inclusive)
        record(sent=3.0, end=3.5, status="error"),
    ]
    assert window(records) == 4.0
    s = summarize(records, slo)
    assert s.window_s == 4.0
    assert s.request_throughput == pytest.approx(4 / 4.0)
    assert s.tokens == 25
    assert s.token_throughput == pytest.approx(25 / 4.0)
    assert s.goodput == pytest.approx(3 / 4.0)
    assert s.slo_attainment == pytest.approx(3 / 5)
    assert [meets_slo(r, slo) for r in records] == [True, True, False, True, False]


def test_summary_distributions() -> None:
    records = [record(sent=0.0, first=0.1 * i, end=1.0) for i in range(1, 11)]
    s = summarize(records, Slo(ttft=0.95))
    expected = Dist(10, 0.55, 0.55, 0.91, 0.991)
    for name in ("n", "mean", "p50", "p90", "p99"):
        assert getattr(s.ttft, name) == pytest.approx(getattr(expected, name)), name
    assert s.slo_p99["ttft"] == pytest.approx(0.991)
    assert not s.meets(Slo(ttft=0.95))
    assert s.meets(Slo(ttft=1.0))
    assert s.meets(Slo())  # no bound: any level with requests meets it


def test_empty_group() -> None:
    s = summarize([], Slo(ttft=1.0))
    assert s.requests == 0
    assert math.isnan(s.ttft.p50)
    assert math.isnan(s.request_throughput)
    assert not s.meets(Slo(ttft=1.0))


def test_split_by_tier_and_turn() -> None:
    records = [
        record(sent=0.0, first=0.1, end=1.0, tier="llm", turn=1),
        record(sent=0.5, first=0.55, end=1.5, tier="faq-cache", turn=2),
        record(sent=1.0, first=1.3, end=2.0, tier="llm", turn=2),
        record(sent=1.0, end=2.0, tier=None, turn=10, status="error"),
    ]
    slo = Slo(ttft=0.2)
    by_tier = split(records, tier_of, slo)
    assert list(by_tier) == ["faq-cache", "llm", "unknown"]
    assert by_tier["llm"].requests == 2
    assert by_tier["llm"].ttft.p50 == pytest.approx(0.2)
    assert by_tier["faq-cache"].ttft.p50 == pytest.approx(0.05)
    assert by_tier["unknown"].errors == 1
    by_turn = split(records, turn_of, slo)
    assert list(by_turn) == [1, 2, 10]  # numeric order, not text order
    assert by_turn[2].requests == 2
    # Each group's throughput is over the level's window, so the groups add up.
    total = summarize(records, slo)
    assert sum(s.request_throughput for s in by_turn.values()) == pytest.approx(
        total.request_throughput
    )
    assert sum(s.goodput for s in by_tier.values()) == pytest.approx(total.goodput)
