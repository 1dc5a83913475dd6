"""The knee of a load sweep: the highest load before latency climbs faster than throughput.

Rule, over the levels in increasing load (``--sweep`` doubles the load from one level to
the next). A level *passes* when

1. it meets the SLO: the p99 of every bounded metric (``--slo``, TTFT by default), with
   failed and timed-out requests counted as infinitely late, is within its bound; and
2. its E2E p50 is less than ``max_growth`` (1.5) times the previous level's: doubling the
   load to reach it raised latency by less than 50 %. The lowest level has no previous one
   and needs only (1).

The knee is the last level of the run of passing levels that starts at the lowest one; the
first failure ends the search, so a noisy pass beyond overload cannot move the knee up.

Why E2E p50 for the growth test: with a fixed number of users and no think time, Little's
law gives throughput = users / E2E, so when doubling the users multiplies E2E by r, the
throughput grows by 2 / r. ``r < 1.5`` is "throughput still grows by more than a third",
and r near 2 is a saturated server, where the extra users only queue. The median is stable
with a few dozen requests per level, where p99 is nearly the maximum; and TTFT far below
capacity is a few milliseconds, whose jitter alone can exceed 50 %. TTFT p99 is what the
customer feels in the tail, so it is the SLO gate instead.

Outcomes: ``found`` (the knee is a tested level, and the level after it fails; the reason
says how); ``not_reached`` (every level passes: the knee is at or beyond the
highest level tested, which is reported as a lower bound — sweep higher); ``none`` (the
lowest level already misses the SLO: the knee, if any, is below it — sweep lower or relax
the SLO).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

MAX_GROWTH = 1.5

KneeStatus = Literal["found", "not_reached", "none"]


@dataclass(frozen=True)
class LevelPoint:
    """What the rule needs from one level."""

    load: float
    e2e_p50: float  # seconds; nan if no request succeeded
    meets_slo: bool


@dataclass(frozen=True)
class LevelCheck:
    load: float
    meets_slo: bool
    growth: float | None  # E2E p50 over the previous level's; None for the lowest level
    passes: bool


@dataclass(frozen=True)
class Knee:
    load: float | None  # the knee; for not_reached the highest level (a lower bound)
    status: KneeStatus
    reason: str
    max_growth: float = MAX_GROWTH
    statistic: str = "e2e_p50"
    checks: list[LevelCheck] = field(default_factory=list)


def _growth(previous: float, current: float) -> float:
    if math.isnan(previous) or math.isnan(current) or previous <= 0:
        return math.inf
    return current / previous


def _load(value: float) -> str:
    return f"{value:g}"


def find_knee(points: Sequence[LevelPoint], max_growth: float = MAX_GROWTH) -> Knee:
    """Apply the rule above to a sweep's levels (any order; sorted by load here)."""
    if not points:
        raise ValueError("a sweep without levels has no knee")
    ordered = sorted(points, key=lambda p: p.load)
    checks: list[LevelCheck] = []
    knee: LevelPoint | None = None
    failure = ""
    for i, point in enumerate(ordered):
        growth = None if i == 0 else _growth(ordered[i - 1].e2e_p50, point.e2e_p50)
        passes = point.meets_slo and (growth is None or growth < max_growth)
        checks.append(LevelCheck(point.load, point.meets_slo, growth, passes))
        if failure:
            continue  # checks of every level are kept for the report
        if passes:
            knee = point
        elif not point.meets_slo:
            failure = f"load {_load(point.load)} misses the SLO"
        else:
            failure = (
                f"load {_load(point.load)} raises E2E p50 {growth:.2f}x over "
                f"{_load(ordered[i - 1].load)} (limit {max_growth:g}x)"
            )
    if knee is None:
        return Knee(
            None,
            "none",
            f"the lowest level, {_load(ordered[0].load)}, already misses the SLO: "
            "the knee is below it (sweep lower or relax --slo)",
            max_growth,
            checks=checks,
        )
    if not failure:
        return Knee(
            knee.load,
            "not_reached",
            f"every level passes: the knee is at or above {_load(knee.load)}, the highest tested",
            max_growth,
            checks=checks,
        )
    return Knee(knee.load, "found", f"the next level fails: {failure}", max_growth, checks=checks)
