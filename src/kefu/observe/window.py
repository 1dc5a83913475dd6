"""Recent answered requests and load samples, summarised over a time window (pure, no I/O).

This is what ``GET /stats`` returns, what the dashboard draws and what
``kefu diagnose`` judges. Percentiles are nearest-rank over the window.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kefu.observe.records import RequestRecord

TIMEOUT_CODES = {"queue_timeout"}


@dataclass(frozen=True, slots=True)
class LoadSample:
    at: float
    running: int
    waiting: int


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return round(ordered[rank - 1], 3)


def spread(values: Iterable[float | None]) -> dict[str, float | None]:
    present = [v for v in values if v is not None]
    return {f"p{q}": percentile(present, q) for q in (50, 95, 99)}


class RecentRequests:
    """Bounded by count and age, so memory stays flat under any load: a record goes
    once it is ``keep_seconds`` old or ``max_records`` newer ones came (about 1 KB each),
    whether or not anyone asks for a summary."""

    def __init__(self, keep_seconds: float = 900, max_records: int = 50_000) -> None:
        self.keep_seconds = keep_seconds
        self.records: deque[RequestRecord] = deque(maxlen=max_records)
        self.samples: deque[LoadSample] = deque(maxlen=int(keep_seconds) + 1)

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)
        # Aged out here, not only when /stats asks: without a dashboard open, the count
        # cap alone kept 50 000 records (~50 MB), filling for hours at a quiet shop's rate.
        self._drop_older_than(record.at - self.keep_seconds)

    def _drop_older_than(self, oldest: float) -> None:
        while self.records and self.records[0].at < oldest:
            self.records.popleft()

    def sample(self, running: int, waiting: int, at: float | None = None) -> None:
        self.samples.append(LoadSample(time.time() if at is None else at, running, waiting))

    def summary(
        self, window: float = 300, bucket: float = 5, now: float | None = None
    ) -> dict[str, Any]:
        now = time.time() if now is None else now
        start = now - window
        self._drop_older_than(now - self.keep_seconds)
        records = [r for r in self.records if r.at >= start]
        samples = [s for s in self.samples if s.at >= start]
        return summarize(records, samples, start=start, end=now, bucket=bucket)


def summarize(
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
        "series": _series(records, samples, start, end, bucket),
    }


def _series(
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
