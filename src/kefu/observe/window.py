"""Recent answered requests and load samples, summarised over a time window (pure, no I/O).

This is what ``GET /stats`` returns, what the dashboard draws and what
``kefu diagnose`` judges. Percentiles are nearest-rank over the window.
"""

from __future__ import annotations

import math
import struct
import time
from array import array
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


@dataclass(frozen=True, slots=True)
class _Kind:
    """What many entries share: their strings and stage names, stored once."""

    tier: str | None
    error: str | None
    engine: str | None
    stages: tuple[str, ...]
    values: struct.Struct  # the stage values that follow an entry's head


# A window's kinds, by (tier, error code, engine, stage names in order): closed sets (tiers,
# KefuError codes, the pool's engines, the timeline's marks), so the table stays small.
Kinds = dict[tuple[str | None, str | None, str | None, tuple[str, ...]], _Kind]

# An entry's head: at, e2e, ttft, tpot, queue, prefill, gateway, upstream TTFT, turn,
# completion tokens (doubles: exact for any int below 2**53; NaN for None).
_HEAD = struct.Struct("<10d")
_F64 = struct.Struct("<d")


def _packed(value: float | None) -> float:
    return math.nan if value is None else value


class WindowEntry:
    """One answered request as the window keeps it: what ``summarize`` and ``window_rows``
    read, its figures packed in one bytes object, its strings and stage names its kind's.

    An entry keeps about a quarter of what its ``RequestRecord`` would (no request id,
    method, route, stage dict or float object per figure): about 230-270 B against
    1.0-1.3 kB (``test_an_entry_is_small`` bounds it). Figures read back equal to the
    record's (NaN stands for None).
    """

    __slots__ = ("kind", "packed")

    def __init__(self, kind: _Kind, packed: bytes) -> None:
        self.kind = kind
        self.packed = packed

    @classmethod
    def of(cls, record: RequestRecord, kinds: Kinds) -> WindowEntry:
        """``record`` packed, its kind taken from ``kinds`` or added to it."""
        stages = record.stages_ms
        key = (record.tier, record.error, record.engine, tuple(stages))
        # get first: setdefault alone would build a Struct on every add.
        kind = kinds.get(key) or kinds.setdefault(
            key, _Kind(*key, struct.Struct(f"<{len(stages)}d"))
        )
        head = _HEAD.pack(
            record.at,
            record.e2e_ms,
            _packed(record.ttft_ms),
            _packed(record.tpot_ms),
            _packed(record.queue_ms),
            _packed(record.prefill_ms),
            _packed(record.gateway_ms),
            _packed(record.upstream_ttft_ms),
            _packed(record.turn),
            record.completion_tokens,
        )
        return cls(kind, head + kind.values.pack(*stages.values()))

    @property
    def at(self) -> float:
        at: float = _F64.unpack_from(self.packed)[0]
        return at

    @property
    def upstream_ttft_ms(self) -> float | None:
        value: float = _F64.unpack_from(self.packed, 56)[0]
        return None if value != value else value  # NaN stands for None

    @property
    def error(self) -> str | None:
        return self.kind.error

    @property
    def engine(self) -> str | None:
        return self.kind.engine


class RecentRequests:
    """Bounded by count and age, so memory stays flat under any load: an entry goes
    once it is ``keep_seconds`` old or ``max_records`` newer ones came (about 230-270 B
    each, see ``WindowEntry``), whether or not anyone asks for a summary."""

    def __init__(self, keep_seconds: float = 900, max_records: int = 50_000) -> None:
        self.keep_seconds = keep_seconds
        self.entries: deque[WindowEntry] = deque(maxlen=max_records)
        self.samples: deque[LoadSample] = deque(maxlen=int(keep_seconds) + 1)
        self.kinds: Kinds = {}

    def add(self, record: RequestRecord) -> None:
        self.entries.append(WindowEntry.of(record, self.kinds))
        # Aged out here, not only when /stats asks: without a dashboard open, the count
        # cap alone would keep 50 000 records, filling for hours at a quiet shop's rate.
        self._drop_older_than(record.at - self.keep_seconds)

    def _drop_older_than(self, oldest: float) -> None:
        while self.entries and self.entries[0].at < oldest:
            self.entries.popleft()

    def since(self, start: float) -> list[WindowEntry]:
        unpack = _F64.unpack_from  # not .at: no call per entry, /stats asks every few seconds
        return [entry for entry in self.entries if unpack(entry.packed)[0] >= start]

    def sample(self, running: int, waiting: int, at: float | None = None) -> None:
        self.samples.append(LoadSample(time.time() if at is None else at, running, waiting))

    def summary(
        self, window: float = 300, bucket: float = 5, now: float | None = None
    ) -> dict[str, Any]:
        now = time.time() if now is None else now
        start = now - window
        self._drop_older_than(now - self.keep_seconds)
        samples = [s for s in self.samples if s.at >= start]
        return summarize(self.since(start), samples, start=start, end=now, bucket=bucket)


class _Bucket:
    """One step of the series, filled as the entries go by."""

    __slots__ = ("e2e", "ok", "requests", "tiers", "tokens", "ttft")

    def __init__(self) -> None:
        self.requests = 0
        self.ok = 0
        self.tokens = 0
        self.ttft = array("d")
        self.e2e = array("d")
        self.tiers: Counter[str] = Counter()


def summarize(
    entries: Sequence[WindowEntry],
    samples: Sequence[LoadSample],
    *,
    start: float,
    end: float,
    bucket: float,
) -> dict[str, Any]:
    span = max(end - start, 1e-9)
    count = max(1, math.ceil((end - start) / bucket))
    buckets = [_Bucket() for _ in range(count)]
    errors: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    # The answers' figures (those without an error), in window order: sums add in that
    # order. Arrays, not lists: the figures are unpacked, so a list would hold a float
    # object for each.
    e2e, ttft, tpot, queue, prefill, gateway = (array("d") for _ in range(6))
    queue_or_0 = array("d")
    tokens = 0
    stage_totals: Counter[str] = Counter()
    # TTFT less queue wait, by turn: what the prompt itself costs, whatever the load.
    by_turn: dict[int, list[float]] = {}
    # One pass, each entry unpacked once: the dashboard asks every few seconds.
    for entry in entries:
        (
            at,
            e2e_ms,
            ttft_ms,
            tpot_ms,
            queue_ms,
            prefill_ms,
            gateway_ms,
            _,
            turn,
            completion,
        ) = _HEAD.unpack_from(entry.packed)
        kind = entry.kind
        step = buckets[min(count - 1, max(0, int((at - start) // bucket)))]
        step.requests += 1
        if kind.error is not None:
            errors[kind.error] += 1
            continue
        step.ok += 1
        completion_tokens = int(completion)
        step.tokens += completion_tokens
        tokens += completion_tokens
        e2e.append(e2e_ms)
        step.e2e.append(e2e_ms)
        # NaN stands for None (NaN != NaN).
        if ttft_ms == ttft_ms:
            ttft.append(ttft_ms)
            step.ttft.append(ttft_ms)
        if tpot_ms == tpot_ms:
            tpot.append(tpot_ms)
        if queue_ms == queue_ms:
            queue.append(queue_ms)
        if prefill_ms == prefill_ms:
            prefill.append(prefill_ms)
        if gateway_ms == gateway_ms:
            gateway.append(gateway_ms)
        waited = queue_ms if queue_ms == queue_ms and queue_ms else 0.0
        queue_or_0.append(waited)
        if kind.tier:
            tiers[kind.tier] += 1
            step.tiers[kind.tier] += 1
        if turn == turn and ttft_ms == ttft_ms:
            by_turn.setdefault(int(turn), []).append(ttft_ms - waited)
        stages = kind.values.unpack_from(entry.packed, _HEAD.size)
        stage_totals.update(dict(zip(kind.stages, stages, strict=True)))
    total_e2e = sum(e2e)
    ok = len(e2e)
    return {
        "window_s": round(span, 3),
        "requests": len(entries),
        "errors": sum(errors.values()),
        "timeouts": sum(n for code, n in errors.items() if code in TIMEOUT_CODES),
        "errors_by_code": dict(errors),
        "tiers": dict(tiers),
        "requests_per_s": round(len(entries) / span, 3),
        "tokens_per_s": round(tokens / span, 3),
        "ttft_ms": spread(ttft),
        "e2e_ms": spread(e2e),
        "tpot_ms": spread(tpot),
        "queue_ms": spread(queue),
        "prefill_ms": spread(prefill),
        "gateway_ms": spread(gateway),
        "queue_share": round(sum(queue_or_0) / total_e2e, 4) if ok else None,
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
        "series": _series(buckets, samples, start, bucket),
    }


def _series(
    buckets: Sequence[_Bucket], samples: Sequence[LoadSample], start: float, bucket: float
) -> list[dict[str, Any]]:
    count = len(buckets)
    load: list[list[LoadSample]] = [[] for _ in range(count)]
    for sample in samples:
        load[min(count - 1, max(0, int((sample.at - start) // bucket)))].append(sample)
    return [
        {
            "t": round(start + i * bucket, 3),
            "requests": step.requests,
            "errors": step.requests - step.ok,
            "tokens_per_s": round(step.tokens / bucket, 3),
            "ttft_ms": spread(step.ttft),
            "e2e_ms": spread(step.e2e),
            "tiers": dict(step.tiers),
            "waiting": max((s.waiting for s in load[i]), default=0),
            "running": max((s.running for s in load[i]), default=0),
        }
        for i, step in enumerate(buckets)
    ]
