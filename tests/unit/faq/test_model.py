"""The decision's numbers: the Clopper-Pearson bound, the threshold its labels support
(fixed-sequence from the top), a judge's errors taken out, and the judge's words."""

from __future__ import annotations

import math

import pytest

from kefu.faq.bound import needed, precision_lower_bound
from kefu.faq.judge import EXPLORE_FLOOR, explore, verdict
from kefu.faq.model import GRID, NEVER, Curve, Step, load_prior


def exact_bound(right: int, served: int, confidence: float = 0.95) -> float:
    """The bound by summing the binomial tail itself, for small counts."""

    def tail(p: float) -> float:
        return sum(
            math.comb(served, i) * p**i * (1 - p) ** (served - i) for i in range(right, served + 1)
        )

    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if tail(middle) < 1 - confidence else (low, middle)
    return low


@pytest.mark.parametrize(("right", "served"), [(1, 2), (5, 10), (19, 20), (95, 100), (196, 200)])
def test_the_bound_is_clopper_pearsons(right: int, served: int) -> None:
    assert precision_lower_bound(right, served) == pytest.approx(
        exact_bound(right, served), abs=1e-6
    )


def test_all_right_needs_this_many_to_reach_a_target() -> None:
    assert needed(0.95) == 59
    assert precision_lower_bound(59, 59) >= 0.95 > precision_lower_bound(58, 58)
    assert precision_lower_bound(0, 10) == 0.0
    with pytest.raises(ValueError, match="11 right of 10"):
        precision_lower_bound(11, 10)


def test_the_threshold_is_tested_from_the_top_and_stops_at_the_first_failure() -> None:
    prior = load_prior()
    # 100 right at 0.9, then 30 wrong at 0.5: 0.9 passes, 0.5 fails.
    curve = Curve.of([0.9] * 100 + [0.5] * 30, [True] * 100 + [False] * 30)
    point = curve.point(0.95, prior)
    assert (point.source, point.threshold, point.labelled, point.right) == ("labels", 0.9, 100, 100)
    # A failure above stops the test even where lower thresholds would pass again.
    mixed = Curve.of([0.99] * 60 + [0.6] * 1000, [i % 5 != 0 for i in range(60)] + [True] * 1000)
    assert mixed.point(0.95, prior).source != "labels"
    assert GRID[0] > GRID[-1]


def test_a_judges_errors_are_taken_out_of_the_bound() -> None:
    step = Step(0.9, 400, 360, judged=400)
    assert step.bound(0.95, 0.0) == pytest.approx(precision_lower_bound(360, 400))
    # 90 % observed from a judge wrong 10 % of the time: about all of them right.
    assert step.bound(0.95, 0.1) > 0.95
    # Half the labels judged: half the correction.
    half = Step(0.9, 400, 360, judged=200)
    assert step.bound(0.95, 0.1) > half.bound(0.95, 0.1) > step.bound(0.95, 0.0)
    assert Curve(()).point(0.95, load_prior()).threshold == NEVER  # no labels, no fallback


def test_the_judges_words() -> None:
    assert verdict("Yes.") is True
    assert verdict(" no, it does not") is False
    assert verdict("是的") is True
    assert verdict("不是") is False
    assert verdict("fake reply to: ...") is None
    assert explore(0) == 1.0
    assert explore(4) == 0.5
    assert explore(10_000) == EXPLORE_FLOOR
