"""The decision's numbers: the Clopper-Pearson bound, the threshold its labels support
(fixed-sequence from the top), a judge's errors taken out, and the judge's words."""

from __future__ import annotations

import math

import pytest

from kefu.faq.bound import needed, precision_lower_bound, precision_upper_bound
from kefu.faq.judge import CHECKS, EXPLORE_FLOOR, Reliability, explore, known_checks, verdict
from kefu.faq.model import GRID, NEVER, Curve, Step, load_prior
from kefu.knowledge.entries import KbEntry


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


@pytest.mark.parametrize(("right", "served"), [(0, 3), (6, 12), (19, 20), (20, 20)])
def test_the_upper_bound_is_the_lower_bound_of_the_wrong_ones(right: int, served: int) -> None:
    assert precision_upper_bound(right, served) == pytest.approx(
        1.0 - exact_bound(served - right, served), abs=1e-6
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


def test_a_fallible_judges_labels_are_tested_only_where_they_could_pass() -> None:
    """A judge wrong 10 % of the time shows right answers right 90 % of the time: 60
    labels at the top could never bound 95 %, so testing them would end the sequence
    whatever the answers; the test starts where the labels are enough."""
    top = Step(0.99, 60, 54, judged=60)
    assert not top.testable(0.95, 0.95, 0.1)
    assert Step(0.99, 60, 60).testable(0.95, 0.95, 0.0)  # exact labels: 59 all right pass
    probabilities = [0.99] * 60 + [0.8] * 600
    right = [i % 10 != 0 for i in range(60)] + [i % 13 != 0 for i in range(600)]
    curve = Curve.of(probabilities, right, [True] * 660)
    point = curve.point(0.95, load_prior(), judge_error=0.1)
    assert (point.source, point.threshold) == ("labels", 0.8)
    assert point.bound >= 0.95
    # Taken as an exact judge, the same verdicts fail at the top and serve nothing.
    assert curve.point(0.95, load_prior()).source != "labels"


def test_labels_that_rule_the_promise_out_overturn_the_priors_threshold() -> None:
    prior = load_prior()
    floor = prior.threshold(0.85)
    assert floor < NEVER  # the prior serves an 85 % promise on its own
    assert Curve(()).point(0.85, prior).source == "prior"
    # Too few labels to test anything, but 6 of 12 right rules 85 % out at the floor.
    refuted = Curve.of([floor + 0.01] * 12, [i % 2 == 0 for i in range(12)], [True] * 12)
    assert refuted.point(0.85, prior).source == "none"
    assert refuted.point(0.85, prior).threshold == NEVER
    # 11 of 12 right does not: the prior's threshold stands.
    kept = Curve.of([floor + 0.01] * 12, [i != 0 for i in range(12)], [True] * 12)
    assert (kept.point(0.85, prior).source, kept.point(0.85, prior).threshold) == ("prior", floor)
    # Enough to test and below the promise, though not ruled out at 95 % confidence.
    below = Curve.of([floor + 0.01] * 40, [i % 6 != 0 for i in range(40)], [True] * 40)
    assert below.point(0.85, prior).source == "none"


def test_the_judges_words() -> None:
    assert verdict("Yes.") is True
    assert verdict(" no, it does not") is False
    assert verdict("是的") is True
    assert verdict("不是") is False
    assert verdict("fake reply to: ...") is None
    assert explore(0) == 1.0
    assert explore(4) == 0.5
    assert explore(10_000) == EXPLORE_FLOOR


def test_a_judge_is_checked_on_questions_whose_answer_is_known() -> None:
    entries = [
        KbEntry.make("How do I return an item?", "Returns within 30 days."),
        KbEntry.make("Can I send something back?", "Returns within 30 days."),
        KbEntry.make("Do you ship abroad?", "We ship to 40 countries."),
    ]
    checks = known_checks(entries, seed=3)
    assert len(checks) == 6  # each question with its own answer and with another's
    for judgment, truth in checks:
        same = (judgment.answer == "Returns within 30 days.") == (
            judgment.message in ("How do I return an item?", "Can I send something back?")
        )
        assert truth is same
        if truth and judgment.answer.startswith("Returns"):
            assert judgment.question != judgment.message  # shown under its other phrasing
    many = [KbEntry.make(f"question {i}?", f"answer {i % 30}.") for i in range(2 * CHECKS)]
    assert len(known_checks(many)) == 2 * CHECKS
    assert not Reliability(30, 24, planned=100).hopeless
    # A quarter of all the planned checks: useless whatever the rest say.
    assert Reliability(30, 25, planned=100).hopeless
    assert Reliability(29, 24, planned=100).counted(right=False).hopeless
    assert known_checks(entries[:2]) == []  # one answer: nothing to tell apart
    # The error taken out is the lower bound of the share wrong; a quarter wrong is useless.
    assert Reliability(100, 0).error == 0.0
    assert 0.05 < Reliability(100, 10).error < 0.10
    assert not Reliability(100, 24).useless
    assert Reliability(100, 25).useless
    assert Reliability(0, 0).useless
