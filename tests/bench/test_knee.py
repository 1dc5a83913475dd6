"""The knee rule on synthetic sweep results (kefu.bench.knee documents it)."""

from __future__ import annotations

import math

import pytest

from kefu.bench.knee import LevelPoint, find_knee
from kefu.bench.load import LevelPlan
from kefu.bench.runner import LevelResult, analyse, knee_of
from kefu.bench.slo import Slo
from tests.bench.conftest import record

LOADS = [1.0, 2.0, 4.0, 8.0, 16.0]


def points(e2e: list[float], meets: list[bool] | None = None) -> list[LevelPoint]:
    meets = meets or [True] * len(e2e)
    return [LevelPoint(x, y, m) for x, y, m in zip(LOADS, e2e, meets, strict=False)]


def test_knee_at_capacity() -> None:
    # 4 slots: latency flat up to 4 users, then doubles with the users (Little's law).
    knee = find_knee(points([0.30, 0.30, 0.31, 0.62, 1.24]))
    assert knee.status == "found"
    assert knee.load == 4.0
    assert "load 8 raises E2E p50 2.00x over 4" in knee.reason
    assert [c.passes for c in knee.checks] == [True, True, True, False, False]
    assert knee.checks[0].growth is None
    assert knee.checks[3].growth == pytest.approx(2.0)


def test_slo_miss_ends_the_search() -> None:
    knee = find_knee(points([0.3, 0.3, 0.3, 0.3, 0.3], [True, True, False, True, True]))
    assert (knee.status, knee.load) == ("found", 2.0)
    assert "load 4 misses the SLO" in knee.reason


def test_no_level_meets_the_slo() -> None:
    knee = find_knee(points([0.3, 0.3, 0.3], [False, False, False]))
    assert knee.status == "none"
    assert knee.load is None
    assert "lowest level, 1, already misses the SLO" in knee.reason


def test_only_the_lowest_level_failing_means_none() -> None:
    knee = find_knee(points([0.3, 0.3, 0.3], [False, True, True]))
    assert (knee.status, knee.load) == ("none", None)


def test_every_level_passes_so_the_knee_is_not_reached() -> None:
    knee = find_knee(points([0.30, 0.32, 0.35, 0.40, 0.50]))
    assert knee.status == "not_reached"
    assert knee.load == 16.0  # a lower bound
    assert "at or above 16" in knee.reason


def test_a_pass_after_a_failure_does_not_move_the_knee() -> None:
    # Past overload a server that sheds load fast (503s) can show flat latency again.
    knee = find_knee(points([0.3, 0.3, 0.6, 0.65, 0.66]))
    assert (knee.status, knee.load) == ("found", 2.0)
    assert knee.checks[4].passes  # recorded, but the search had ended


def test_growth_limit_is_strict_and_configurable() -> None:
    assert find_knee(points([0.25, 0.375])).load == 1.0  # exactly 1.5x fails
    assert find_knee(points([0.25, 0.375]), max_growth=1.6).status == "not_reached"


def test_a_level_without_any_success_fails() -> None:
    knee = find_knee(points([0.3, math.nan, 0.3]))
    assert (knee.status, knee.load) == ("found", 1.0)
    assert knee.checks[1].growth == math.inf


def test_levels_are_taken_in_load_order() -> None:
    shuffled = list(reversed(points([0.30, 0.30, 0.31, 0.62, 1.24])))
    assert find_knee(shuffled).load == 4.0


def test_no_levels() -> None:
    with pytest.raises(ValueError, match="without levels"):
        find_knee([])


def _level(index: int, users: float, e2e: float, failures: int = 0) -> LevelResult:
    plan = LevelPlan(index, "users", users, requests=100, duration=60, timeout=10)
    records = [record(sent=i, first=i + 0.05, end=i + e2e, load=users) for i in range(100)]
    for r in records[:failures]:
        r.status = "error"
    return analyse(plan, records, Slo(ttft=1.0))


def test_failures_count_as_slo_misses_in_a_sweep() -> None:
    levels = [_level(0, 1, 0.3), _level(1, 2, 0.3), _level(2, 4, 0.3, failures=5)]
    assert [lv.meets_slo for lv in levels] == [True, True, False]
    knee = knee_of(levels)
    assert (knee.status, knee.load) == ("found", 2.0)
