"""``kefu bench compare A.json B.json``: two runs side by side, level by level, with B / A.

Levels are matched by load (users, or sessions per second). A ratio above 1 means B is
higher: worse for latencies and error rates, better for throughputs.
"""

from __future__ import annotations

import math
from typing import Any

from kefu.bench.tables import load_text, ms, num, pct, render

# (label, path in a level's summary, format, higher is better)
METRICS: tuple[tuple[str, tuple[str, ...], str, bool], ...] = (
    ("req/s", ("request_throughput",), "num", True),
    ("tok/s", ("token_throughput",), "num", True),
    ("goodput/s", ("goodput",), "num", True),
    ("SLO met", ("slo_attainment",), "pct", True),
    ("errors", ("error_rate",), "pct", False),
    ("TTFT p50 ms", ("ttft", "p50"), "ms", False),
    ("TTFT p99 ms", ("ttft", "p99"), "ms", False),
    ("TPOT p50 ms", ("tpot", "p50"), "ms", False),
    ("ITL p99 ms", ("itl", "p99"), "ms", False),
    ("E2E p50 ms", ("e2e", "p50"), "ms", False),
    ("E2E p99 ms", ("e2e", "p99"), "ms", False),
)


def _get(summary: dict[str, Any] | None, path: tuple[str, ...]) -> float | None:
    value: Any = summary
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, int | float) else None


def _format(value: float | None, kind: str) -> str:
    if kind == "ms":
        return ms(value)
    if kind == "pct":
        return pct(value)
    return num(value)


def ratio(a: float | None, b: float | None) -> str:
    """B / A as '1.23x'; '-' where either is missing or A is zero."""
    if a is None or b is None or a == 0 or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{b / a:.2f}x"


def better(a: float | None, b: float | None, higher_is_better: bool) -> str:
    """Which run did better on this metric: 'A', 'B', or '=' within 2 %."""
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return "-"
    if abs(b - a) <= 0.02 * max(abs(a), abs(b)):
        return "="
    return "B" if (b > a) == higher_is_better else "A"


def _levels(data: dict[str, Any]) -> dict[float, dict[str, Any]]:
    return {float(lv["load"]): lv.get("summary") or {} for lv in data.get("levels", [])}


def _knee(data: dict[str, Any]) -> str:
    knee = data.get("knee")
    if not isinstance(knee, dict):
        return "(no sweep)"
    load = knee.get("load")
    where = "-" if load is None else load_text(float(load))
    return {"found": where, "not_reached": f">= {where}"}.get(str(knee.get("status")), "none")


def compare_text(a: dict[str, Any], b: dict[str, Any], a_name: str, b_name: str) -> str:
    mode_a, mode_b = a.get("run", {}).get("mode"), b.get("run", {}).get("mode")
    unit = "users" if mode_a == "users" else "sessions/s"
    lines = [
        f"A: {a.get('label', '')}  ({a_name})",
        f"B: {b.get('label', '')}  ({b_name})",
        "B/A = ratio (above 1: B higher - worse for latency and errors, better for "
        "throughput); better: which run did better, '=' within 2 %",
    ]
    if mode_a != mode_b:
        lines.append(f"note: A ran by {mode_a}, B by {mode_b}; levels are matched by number")
    levels_a, levels_b = _levels(a), _levels(b)
    rows = []
    for load in sorted(set(levels_a) | set(levels_b)):
        sa, sb = levels_a.get(load), levels_b.get(load)
        for label, path, kind, higher in METRICS:
            va, vb = _get(sa, path), _get(sb, path)
            formatted = [_format(va, kind), _format(vb, kind), ratio(va, vb)]
            rows.append([load_text(load), label, *formatted, better(va, vb, higher)])
    table = render([unit, "metric", "A", "B", "B/A", "better"], rows, left=2)
    knees = f"knee ({unit}): A {_knee(a)}, B {_knee(b)}"
    return "\n".join(lines) + "\n\n" + table + "\n\n" + knees + "\n"
