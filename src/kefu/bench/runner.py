"""A whole run: preflight, then each load level in turn, then the analysis of each level."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kefu.bench.client import Clients, Clock, Target, preflight
from kefu.bench.knee import MAX_GROWTH, Knee, LevelPoint, find_knee
from kefu.bench.load import Level, LevelPlan, LevelState, Mode
from kefu.bench.metrics import Summary, split, summarize, tier_of, turn_of, window
from kefu.bench.record import RequestRecord
from kefu.bench.slo import Slo
from kefu.bench.workload import Workload, WorkloadSpec

# A pause between levels, so a level starts on a server that has finished (or cancelled)
# what the previous one left; not counted in any level's window.
SETTLE_S = 1.0
TICK_S = 0.25


@dataclass(frozen=True)
class BenchConfig:
    target: Target
    workload: WorkloadSpec
    mode: Mode
    levels: tuple[float, ...]
    sweep: bool
    requests: int  # per level
    duration: float  # per level, seconds
    timeout: float  # per request, seconds
    slo: Slo
    max_growth: float = MAX_GROWTH
    label: str = ""
    api_key: str | None = field(default=None, repr=False)  # never in a report


@dataclass(frozen=True)
class LevelResult:
    plan: LevelPlan
    records: list[RequestRecord]
    summary: Summary
    by_tier: dict[str, Summary]
    by_turn: dict[int, Summary]
    meets_slo: bool


@dataclass(frozen=True)
class BenchResult:
    config: BenchConfig
    target: Target  # as the preflight completed it (the model name)
    levels: list[LevelResult]
    knee: Knee | None  # for sweeps only
    started_at: float  # time.time()
    wall_s: float


class Progress(Protocol):
    def level_started(self, plan: LevelPlan) -> None: ...
    def tick(self, state: LevelState, now: float) -> None: ...
    def level_done(self, result: LevelResult) -> None: ...


def analyse(plan: LevelPlan, records: Sequence[RequestRecord], slo: Slo) -> LevelResult:
    span = window(records)
    summary = summarize(records, slo, span)
    return LevelResult(
        plan=plan,
        records=list(records),
        summary=summary,
        by_tier=split(records, tier_of, slo, span),
        by_turn=split(records, turn_of, slo, span),
        meets_slo=summary.meets(slo),
    )


def knee_of(levels: Sequence[LevelResult], max_growth: float = MAX_GROWTH) -> Knee:
    points = [LevelPoint(lv.plan.load, lv.summary.e2e.p50, lv.meets_slo) for lv in levels]
    return find_knee(points, max_growth)


async def run_bench(config: BenchConfig, progress: Progress | None = None) -> BenchResult:
    """Raises TargetError (from the preflight) before any load is sent."""
    origin = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - origin

    started_at = time.time()
    workload = Workload(config.workload)
    results: list[LevelResult] = []
    async with Clients(config.timeout, api_key=config.api_key) as clients:
        target = await preflight(clients.for_session(0), config.target)
        for index, load in enumerate(config.levels):
            if index:
                await asyncio.sleep(SETTLE_S)
            plan = LevelPlan(
                index=index,
                mode=config.mode,
                load=load,
                requests=config.requests,
                duration=config.duration,
                timeout=config.timeout,
                seed=config.workload.seed,
            )
            level = Level(clients, target, workload, plan, clock)
            if progress is not None:
                progress.level_started(plan)
            records = await _with_ticks(level, progress, clock)
            result = analyse(plan, records, config.slo)
            results.append(result)
            if progress is not None:
                progress.level_done(result)
    knee = knee_of(results, config.max_growth) if config.sweep else None
    return BenchResult(config, target, results, knee, started_at, clock())


async def _with_ticks(level: Level, progress: Progress | None, clock: Clock) -> list[RequestRecord]:
    if progress is None:
        return await level.run()
    running = asyncio.ensure_future(level.run())
    try:
        while not running.done():
            await asyncio.wait({running}, timeout=TICK_S)
            progress.tick(level.state, clock())
        return running.result()
    finally:
        running.cancel()
