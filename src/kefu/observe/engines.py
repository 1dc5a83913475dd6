"""Per-engine rows of a pool of remote engines for /stats, the dashboard and diagnose (pure).

The window's records say how each engine served (answers, failures, its TTFT as kefu saw
it: request sent to first token); the pool's live rows say how it is now (breaker, in
flight, and the queue and KV use its own /metrics report). The slow engine is the one
whose TTFT p50 is well above the others': with affinity, its conversations stay on it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from kefu.engine.base import UpstreamStats
from kefu.observe.window import WindowEntry, percentile

SLOW_FACTOR = 1.5  # TTFT p50 over the other engines' median by this factor...
SLOW_MIN_MS = 50.0  # ...and by this much, is slow
SLOW_MIN_ANSWERS = 5


def window_rows(records: Sequence[WindowEntry]) -> dict[str, dict[str, Any]]:
    """Per engine: answers, failures and upstream TTFT p50/p99 over the window."""
    by_engine: dict[str, list[WindowEntry]] = {}
    for record in records:
        if record.engine is not None:
            by_engine.setdefault(record.engine, []).append(record)
    rows = {}
    for name, mine in sorted(by_engine.items()):
        ttfts = [r.upstream_ttft_ms for r in mine if r.error is None and r.upstream_ttft_ms]
        rows[name] = {
            "answers": sum(r.error is None for r in mine),
            "failed": sum(r.error is not None for r in mine),
            "upstream_ttft_ms": {
                "p50": percentile(ttfts, 50),
                "p99": percentile(ttfts, 99),
            },
        }
    return rows


def with_live(window: dict[str, dict[str, Any]], live: Sequence[UpstreamStats]) -> dict[str, Any]:
    """One row per engine of the pool (window figures and its state now), and the slow one."""
    rows = []
    for engine in live:
        row = {"answers": 0, "failed": 0, "upstream_ttft_ms": {"p50": None, "p99": None}}
        row |= window.get(engine.name, {})
        rows.append(asdict(engine) | row)
    return {"engines": rows, "slow_engine": slow_engine(rows)}


def slow_engine(rows: Sequence[dict[str, Any]]) -> str | None:
    p50s = {
        row["name"]: row["upstream_ttft_ms"]["p50"]
        for row in rows
        if row["answers"] >= SLOW_MIN_ANSWERS and row["upstream_ttft_ms"]["p50"] is not None
    }
    if len(p50s) < 2:
        return None
    slowest: str = max(p50s, key=lambda name: p50s[name])
    others = statistics.median(v for k, v in p50s.items() if k != slowest)
    if p50s[slowest] > others * SLOW_FACTOR and p50s[slowest] - others > SLOW_MIN_MS:
        return slowest
    return None
