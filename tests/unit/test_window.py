"""summarize / RecentRequests: the /stats JSON from synthetic RequestRecords (pure, no clock)."""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from kefu.observe.records import RequestRecord
from kefu.observe.window import (
    TIMEOUT_CODES,
    LoadSample,
    RecentRequests,
    WindowEntry,
    percentile,
    spread,
    summarize,
)

START = 1_000.0
END = 1_060.0


def rec(
    at: float = START + 1,
    *,
    e2e: float = 100.0,
    ttft: float | None = 20.0,
    queue: float | None = 5.0,
    prefill: float | None = 10.0,
    decode: float | None = 80.0,
    tier: str | None = "llm",
    turn: int | None = None,
    error: str | None = None,
    tokens: int = 10,
    stages: dict[str, float] | None = None,
) -> RequestRecord:
    if stages is None:
        engine = (queue or 0) + (prefill or 0) + (decode or 0)
        stages = {"parse": 1.0, "queue": queue or 0, "prefill": prefill or 0}
        stages |= {"decode": decode or 0, "send": e2e - engine - 1.0}
    return RequestRecord(
        at=at,
        request_id=f"r{at}",
        method="POST",
        route="/chat",
        status=200 if error is None else 503,
        e2e_ms=e2e,
        tier=tier,
        turn=turn,
        error=error,
        ttft_ms=ttft,
        queue_ms=queue,
        prefill_ms=prefill,
        decode_ms=decode,
        gateway_ms=e2e - (queue or 0) - (prefill or 0) - (decode or 0),
        completion_tokens=tokens,
        stages_ms=stages,
    )


def summary(
    records: list[RequestRecord],
    samples: list[LoadSample] | None = None,
    *,
    bucket: float = 10.0,
) -> dict[str, Any]:
    entries = [WindowEntry.of(r, {}) for r in records]
    return summarize(entries, samples or [], start=START, end=END, bucket=bucket)


# --- percentiles ---


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0


def test_percentile_of_few_values_takes_an_observed_value() -> None:
    ten = [float(v) for v in range(10, 0, -1)]  # unsorted on purpose
    assert percentile(ten, 50) == 5.0  # rank ceil(5.0) = 5
    assert percentile(ten, 95) == 10.0  # rank ceil(9.5) = 10
    assert percentile(ten, 99) == 10.0
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0  # rank ceil(1.5) = 2
    assert percentile([7.0], 99) == 7.0
    assert percentile([7.0, 9.0], 0) == 7.0  # rank is at least 1


def test_percentile_of_nothing() -> None:
    assert percentile([], 50) is None
    assert spread([None, None]) == {"p50": None, "p95": None, "p99": None}


def test_spread_skips_missing_values() -> None:
    assert spread([None, 4.0, 2.0, None, 3.0]) == {"p50": 3.0, "p95": 4.0, "p99": 4.0}


def test_summary_percentiles_are_over_answers_without_errors() -> None:
    records = [rec(ttft=float(v), e2e=float(v) * 10) for v in range(1, 21)]
    records.append(rec(ttft=None, e2e=99_999.0, error="engine_error"))
    s = summary(records)
    assert s["ttft_ms"] == {"p50": 10.0, "p95": 19.0, "p99": 20.0}
    assert s["e2e_ms"] == {"p50": 100.0, "p95": 190.0, "p99": 200.0}


# --- counts ---


def test_errors_and_timeouts() -> None:
    records = [
        rec(),
        rec(),
        rec(error="queue_timeout", ttft=None),
        rec(error="queue_timeout", ttft=None),
        rec(error="queue_full", ttft=None),
        rec(error="engine_error", ttft=None),
    ]
    s = summary(records)
    assert s["requests"] == 6  # errors are requests too
    assert s["errors"] == 4
    assert s["timeouts"] == 2  # only queue_timeout is a timeout
    assert s["errors_by_code"] == {"queue_timeout": 2, "queue_full": 1, "engine_error": 1}


def test_tiers_count_answers_only() -> None:
    records = [rec(tier="llm"), rec(tier="llm"), rec(tier="cache"), rec(error="engine_error")]
    assert summary(records)["tiers"] == {"llm": 2, "cache": 1}


def test_rates_over_the_window() -> None:
    records = [rec(tokens=30), rec(tokens=30), rec(tokens=5, error="engine_error")]
    s = summary(records)
    assert s["window_s"] == 60.0
    assert s["requests_per_s"] == pytest.approx(3 / 60, abs=0.001)
    assert s["tokens_per_s"] == pytest.approx(60 / 60, abs=0.001)  # failed answers' tokens not


# --- shares ---


def test_queue_share_is_queue_wait_over_e2e() -> None:
    records = [rec(e2e=100.0, queue=30.0), rec(e2e=300.0, queue=90.0)]
    records.append(rec(e2e=5_000.0, queue=5_000.0, error="queue_timeout"))  # not an answer
    assert summary(records)["queue_share"] == pytest.approx(120 / 400)


def test_queue_share_counts_missing_queue_as_zero() -> None:
    records = [rec(e2e=100.0, queue=50.0), rec(e2e=100.0, queue=None)]
    assert summary(records)["queue_share"] == pytest.approx(0.25)


def test_stage_share_sums_to_one() -> None:
    records = [
        rec(e2e=100.0, queue=10.0, prefill=20.0, decode=60.0),
        rec(e2e=400.0, queue=200.0, prefill=30.0, decode=150.0),
        rec(e2e=50.0, queue=0.0, prefill=5.0, decode=40.0),
    ]
    shares = summary(records)["stage_share"]
    assert set(shares) == {"parse", "queue", "prefill", "decode", "send"}
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.001)
    assert shares["queue"] == pytest.approx(210 / 550, abs=0.0001)
    assert shares["decode"] == pytest.approx(250 / 550, abs=0.0001)


def test_no_answers_no_shares() -> None:
    s = summary([rec(error="queue_full", ttft=None)])
    assert s["queue_share"] is None
    assert s["stage_share"] == {}
    assert s["ttft_ms"] == {"p50": None, "p95": None, "p99": None}
    empty = summary([])
    assert empty["requests"] == 0
    assert empty["errors"] == 0
    assert empty["queue_share"] is None
    assert empty["tiers"] == {}
    assert empty["ttft_less_queue_by_turn"] == {}


def test_ttft_less_queue_by_turn() -> None:
    records = [
        rec(turn=1, ttft=50.0, queue=20.0),  # 30
        rec(turn=1, ttft=40.0, queue=0.0),  # 40
        rec(turn=1, ttft=25.0, queue=None),  # 25
        rec(turn=2, ttft=300.0, queue=100.0),  # 200
        rec(turn=10, ttft=90.0, queue=10.0),  # 80
        rec(turn=3, ttft=None),  # no first token: left out
        rec(turn=None, ttft=70.0),  # /v1: no turn
        rec(turn=1, ttft=1.0, queue=0.0, error="engine_error"),  # failed: left out
    ]
    by_turn = summary(records)["ttft_less_queue_by_turn"]
    assert by_turn == {
        "1": {"count": 3, "p50": 30.0},
        "2": {"count": 1, "p50": 200.0},
        "10": {"count": 1, "p50": 80.0},
    }
    assert list(by_turn) == ["1", "2", "10"]  # by turn number, not as strings


# --- series ---


def test_series_puts_each_record_in_its_bucket() -> None:
    records = [
        rec(START + 0.0, ttft=1.0),  # bucket 0 (its start)
        rec(START + 9.999, ttft=2.0),  # bucket 0
        rec(START + 10.0, ttft=3.0),  # bucket 1
        rec(START + 35.0, ttft=4.0),  # bucket 3
        rec(START + 35.5, ttft=None, error="queue_full"),  # bucket 3
        rec(END, ttft=5.0),  # the window's end belongs to the last bucket
    ]
    series = summary(records, bucket=10.0)["series"]
    assert [row["t"] for row in series] == [START + 10 * i for i in range(6)]
    assert [row["requests"] for row in series] == [2, 1, 0, 2, 0, 1]
    assert [row["errors"] for row in series] == [0, 0, 0, 1, 0, 0]
    assert series[0]["ttft_ms"] == {"p50": 1.0, "p95": 2.0, "p99": 2.0}
    assert series[1]["ttft_ms"]["p50"] == 3.0
    assert series[3]["ttft_ms"] == {"p50": 4.0, "p95": 4.0, "p99": 4.0}
    assert series[5]["ttft_ms"]["p50"] == 5.0
    assert series[3]["tiers"] == {"llm": 1}


def test_series_gaps_have_null_percentiles() -> None:
    series = summary([rec(START + 1)], bucket=10.0)["series"]
    for row in series[1:]:
        assert row["requests"] == 0
        assert row["errors"] == 0
        assert row["tokens_per_s"] == 0
        assert row["tiers"] == {}
        assert row["ttft_ms"] == {"p50": None, "p95": None, "p99": None}
        assert row["e2e_ms"] == {"p50": None, "p95": None, "p99": None}
        assert row["waiting"] == 0
        assert row["running"] == 0


def test_series_tokens_per_second_per_bucket() -> None:
    records = [rec(START + 1, tokens=30), rec(START + 2, tokens=20)]
    series = summary(records, bucket=10.0)["series"]
    assert series[0]["tokens_per_s"] == pytest.approx(5.0)


def test_series_has_at_least_one_bucket() -> None:
    s = summarize([], [], start=START, end=START + 1, bucket=5)
    assert len(s["series"]) == 1


def test_load_samples_take_the_maximum_per_bucket() -> None:
    samples = [
        LoadSample(START + 1, running=2, waiting=0),
        LoadSample(START + 2, running=8, waiting=5),
        LoadSample(START + 3, running=4, waiting=1),
        LoadSample(START + 25, running=1, waiting=12),
    ]
    s = summary([], samples, bucket=10.0)
    series = s["series"]
    assert (series[0]["running"], series[0]["waiting"]) == (8, 5)
    assert (series[1]["running"], series[1]["waiting"]) == (0, 0)
    assert (series[2]["running"], series[2]["waiting"]) == (1, 12)
    assert s["load"] == {"running_max": 8, "waiting_max": 12}


# --- RecentRequests ---


def test_summary_counts_only_the_window() -> None:
    recent = RecentRequests(keep_seconds=900)
    now = 10_000.0
    for age in (5, 50, 250, 400):
        recent.add(rec(now - age))
    assert recent.summary(window=300, bucket=5, now=now)["requests"] == 3
    assert recent.summary(window=60, bucket=5, now=now)["requests"] == 2
    assert len(recent.entries) == 4  # older than the window but within keep_seconds: kept


def test_old_records_are_dropped_after_keep_seconds() -> None:
    recent = RecentRequests(keep_seconds=100)
    now = 10_000.0
    for age in (150, 101, 99, 1):
        recent.add(rec(now - age))
    s = recent.summary(window=100, bucket=10, now=now)
    assert s["requests"] == 2
    assert [r.at for r in recent.entries] == [now - 99, now - 1]


def test_old_records_go_as_new_ones_come_without_a_summary() -> None:
    # Nobody asks for /stats: the window still holds keep_seconds of records, no more,
    # however long it runs (a soak found it growing to the count cap).
    recent = RecentRequests(keep_seconds=100, max_records=1_000_000)
    for i in range(10_000):  # one a second, for 100 times the window
        recent.add(rec(START + i))
    assert len(recent.entries) == 101
    assert recent.entries[0].at == START + 10_000 - 1 - 100


def test_load_samples_in_the_window() -> None:
    recent = RecentRequests()
    now = 10_000.0
    recent.sample(running=8, waiting=20, at=now - 400)  # outside a 300 s window
    recent.sample(running=3, waiting=2, at=now - 10)
    s = recent.summary(window=300, bucket=5, now=now)
    assert s["load"] == {"running_max": 3, "waiting_max": 2}
    assert len(s["series"]) == 60


def test_records_are_bounded_by_count() -> None:
    recent = RecentRequests(max_records=3)
    for i in range(5):
        recent.add(rec(START + i))
    assert [r.at for r in recent.entries] == [START + 2, START + 3, START + 4]


def test_samples_are_bounded_by_keep_seconds() -> None:
    recent = RecentRequests(keep_seconds=10)
    for i in range(30):
        recent.sample(running=i, waiting=0, at=START + i)
    assert len(recent.samples) == 11


# --- the window's compact entries ---

FIELDS = ["at", "error", "engine", "upstream_ttft_ms"]  # what the window's readers ask of an entry
PIPELINE = ["auth", "limits", "parse", "session", "context", "route", "admission"]
PIPELINE += ["queue", "prefill", "decode", "finish", "send"]


def varied(seed: int, count: int, start: float = START) -> list[RequestRecord]:
    """Records as the server makes them, and the odd ones: failures, missing figures, turns
    past 256, tokens past 2**31, stages in another order, an engine pool."""
    rng = random.Random(seed)

    def ms(low: float, high: float, absent: float = 0.2) -> float | None:
        return None if rng.random() < absent else round(rng.uniform(low, high), 3)

    records = []
    for i in range(count):
        error = rng.choice([None] * 6 + ["queue_timeout", "overloaded", "engine_error"])
        names = PIPELINE[: rng.randint(0, len(PIPELINE))]
        if rng.random() < 0.2:
            names = names[::-1]
        engine = rng.choice([None, "gpu-a", "gpu-b"])
        prefill = ms(1, 400)
        records.append(
            RequestRecord(
                at=start + i * (END - START) / count + rng.random() * 1e-3,
                request_id=f"{rng.getrandbits(128):032x}",
                method="POST",
                route=rng.choice(["/chat", "/v1/chat/completions"]),
                status=200 if error is None else 503,
                e2e_ms=round(rng.uniform(1, 9_000), 3),
                tier=rng.choice(["llm", "faq", "cache", "handoff"]),
                turn=rng.choice([None, 1, 2, 3, 300]),
                error=error,
                finish_reason=rng.choice([None, "stop", "length"]),
                ttft_ms=ms(1, 2_000),
                tpot_ms=ms(1, 60),
                queue_ms=rng.choice([ms(0, 900), 0.0, -0.0]),
                prefill_ms=prefill,
                decode_ms=ms(1, 5_000),
                gateway_ms=ms(0, 40),
                prompt_tokens=rng.randint(0, 4_000),
                completion_tokens=rng.choice([0, 1, rng.randint(2, 900), 2**40]),
                cached_tokens=rng.randint(0, 4_000),
                stages_ms={name: round(rng.uniform(0, 300), 3) for name in names},
                engine=engine,
                route_reason=None if engine is None else "affinity",
                upstream_ttft_ms=prefill if engine is not None else None,
            )
        )
    return records


def test_an_entry_reads_back_its_record() -> None:
    for record in varied(seed=1, count=300):
        entry = WindowEntry.of(record, {})
        for name in FIELDS:  # repr: the same type, sign of zero and order of stages too
            assert repr(getattr(entry, name)) == repr(getattr(record, name)), name


def test_summaries_of_entries_equal_those_of_records_byte_for_byte() -> None:
    for seed in range(5):
        records = varied(seed, count=400)
        entries = [WindowEntry.of(r, {}) for r in records]
        samples = [LoadSample(START + i, running=i % 4, waiting=i % 7) for i in range(60)]
        for bucket in (1.0, 7.5, 60.0):
            expected = summarize_records(records, samples, start=START, end=END, bucket=bucket)
            got = summarize(entries, samples, start=START, end=END, bucket=bucket)
            assert json.dumps(got) == json.dumps(expected)
    nothing = summarize_records([], [], start=START, end=END, bucket=5.0)
    assert json.dumps(summarize([], [], start=START, end=END, bucket=5.0)) == json.dumps(nothing)


def test_the_window_summarises_as_its_records_would() -> None:
    records = varied(seed=7, count=500, start=START + 240)
    recent = RecentRequests(keep_seconds=900)
    for record in records:
        recent.add(record)
    now = records[-1].at + 1
    for window in (30.0, 300.0, 900.0):
        inside = [r for r in records if r.at >= now - window]
        expected = summarize_records(inside, [], start=now - window, end=now, bucket=window / 60)
        got = recent.summary(window=window, bucket=window / 60, now=now)
        assert json.dumps(got) == json.dumps(expected)


def test_a_window_shares_its_kinds_and_keeps_them_to_itself() -> None:
    one, other = RecentRequests(), RecentRequests()
    for recent in (one, one, other):
        recent.add(rec())
    assert one.entries[0].kind is one.entries[1].kind
    assert one.entries[0].kind is not other.entries[0].kind
    assert len(one.kinds) == len(other.kinds) == 1


def test_an_entry_is_small() -> None:
    """A RequestRecord kept ~1 350 B with 12 stages; an entry 265 B (tracemalloc)."""
    count = 2_000
    records = [
        RequestRecord(
            at=START + i * 0.01,
            request_id=f"{i:032x}",
            method="POST",
            route="/chat",
            status=200,
            e2e_ms=812.345 + i,
            tier="llm",
            turn=i % 40,
            finish_reason="stop",
            ttft_ms=210.5 + i,
            tpot_ms=12.25,
            queue_ms=3.5 + i,
            prefill_ms=150.125,
            decode_ms=600.0 + i,
            gateway_ms=4.5,
            prompt_tokens=1_800,
            completion_tokens=300 + i,
            stages_ms={name: 1.5 * n + i for n, name in enumerate(PIPELINE)},
        )
        for i in range(count)
    ]
    recent = RecentRequests()
    recent.add(records[0])  # its kind, once
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for record in records[1:]:
            recent.add(record)
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / (count - 1)
    finally:
        if not tracing:
            tracemalloc.stop()
    assert len(recent.entries) == count
    assert per_entry < 350, per_entry  # generous: an object per figure or stage breaks it


# --- the reference: summarize as it was over RequestRecords, before the window packed them ---


def summarize_records(
    records: Sequence[RequestRecord],
    samples: Sequence[LoadSample],
    *,
    start: float,
    end: float,
    bucket: float,
) -> dict[str, Any]:
    span = max(end - start, 1e-9)
    ok = [r for r in records if r.error is None]
    errors = Counter(r.error for r in records if r.error is not None)
    total_e2e = sum(r.e2e_ms for r in ok)
    stage_totals: Counter[str] = Counter()
    for r in ok:
        stage_totals.update(r.stages_ms)
    # TTFT less queue wait, by turn: what the prompt itself costs, whatever the load.
    by_turn: dict[int, list[float]] = {}
    for r in ok:
        if r.turn is not None and r.ttft_ms is not None:
            by_turn.setdefault(r.turn, []).append(r.ttft_ms - (r.queue_ms or 0))
    return {
        "window_s": round(span, 3),
        "requests": len(records),
        "errors": sum(errors.values()),
        "timeouts": sum(n for code, n in errors.items() if code in TIMEOUT_CODES),
        "errors_by_code": dict(errors),
        "tiers": dict(Counter(r.tier for r in ok if r.tier)),
        "requests_per_s": round(len(records) / span, 3),
        "tokens_per_s": round(sum(r.completion_tokens for r in ok) / span, 3),
        "ttft_ms": spread(r.ttft_ms for r in ok),
        "e2e_ms": spread(r.e2e_ms for r in ok),
        "tpot_ms": spread(r.tpot_ms for r in ok),
        "queue_ms": spread(r.queue_ms for r in ok),
        "prefill_ms": spread(r.prefill_ms for r in ok),
        "gateway_ms": spread(r.gateway_ms for r in ok),
        "queue_share": round(sum(r.queue_ms or 0 for r in ok) / total_e2e, 4) if ok else None,
        "stage_share": {stage: round(ms / total_e2e, 4) for stage, ms in stage_totals.items()}
        if total_e2e
        else {},
        "ttft_less_queue_by_turn": {
            str(turn): {"count": len(v), "p50": percentile(v, 50)}
            for turn, v in sorted(by_turn.items())
        },
        "load": {
            "running_max": max((s.running for s in samples), default=0),
            "waiting_max": max((s.waiting for s in samples), default=0),
        },
        "series": _series_of_records(records, samples, start, end, bucket),
    }


def _series_of_records(
    records: Sequence[RequestRecord],
    samples: Sequence[LoadSample],
    start: float,
    end: float,
    bucket: float,
) -> list[dict[str, Any]]:
    count = max(1, math.ceil((end - start) / bucket))
    grouped: list[list[RequestRecord]] = [[] for _ in range(count)]
    for r in records:  # one pass: the dashboard asks every few seconds
        grouped[min(count - 1, max(0, int((r.at - start) // bucket)))].append(r)
    load: list[list[LoadSample]] = [[] for _ in range(count)]
    for sample in samples:
        load[min(count - 1, max(0, int((sample.at - start) // bucket)))].append(sample)
    rows: list[dict[str, Any]] = []
    for i, inside in enumerate(grouped):
        ok = [r for r in inside if r.error is None]
        rows.append(
            {
                "t": round(start + i * bucket, 3),
                "requests": len(inside),
                "errors": len(inside) - len(ok),
                "tokens_per_s": round(sum(r.completion_tokens for r in ok) / bucket, 3),
                "ttft_ms": spread(r.ttft_ms for r in ok),
                "e2e_ms": spread(r.e2e_ms for r in ok),
                "tiers": dict(Counter(r.tier for r in ok if r.tier)),
                "waiting": max((s.waiting for s in load[i]), default=0),
                "running": max((s.running for s in load[i]), default=0),
            }
        )
    return rows
