"""Outcomes: admission's predictions beside what happened, the correction they give and the
confusion of would-refuse against missed-the-SLO (pure, hand-made outcomes)."""

from __future__ import annotations

import pytest

from kefu.limits.outcomes import (
    MIN_OUTCOMES,
    Histogram,
    Outcome,
    Outcomes,
    censored_quantile,
    quantile,
)


def outcome(
    realized: float, *, estimate: float = 1.0, predicted: float = 1.0, **flags: bool
) -> Outcome:
    return Outcome(
        estimate=estimate,
        predicted=predicted,
        realized=realized,
        queued=flags.get("queued", True),
        rule="curve" if flags.get("would_refuse", False) else None,
        missed=flags.get("missed", realized > 2.0),
    )


def test_quantile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 11)]
    assert quantile(values, 0.5) == 5.0
    assert quantile(values, 0.9) == 9.0
    assert quantile(values, 0.91) == 10.0
    assert quantile([3.0], 0.01) == 3.0


def test_the_censored_quantile_counts_a_give_up_as_at_least_its_value() -> None:
    exact = [(float(v), False) for v in range(1, 11)]
    assert censored_quantile(exact, 0.9) == quantile([float(v) for v in range(1, 11)], 0.9)
    # Two who gave up waiting at 0.5: they would have come later, not at 0.5.
    ratios = [(0.5, True), (0.5, True), *[(float(v), False) for v in range(1, 9)]]
    assert censored_quantile(ratios, 0.5) == 4.0  # not 3.0, as exact values would say
    assert quantile([r for r, _ in ratios], 0.5) == 3.0
    # The largest ones censored: the quantile is out of reach, the largest value bounds it.
    assert censored_quantile([(1.0, False), (2.0, True), (3.0, True)], 0.9) == 3.0


def test_a_give_up_raises_the_correction() -> None:
    """Waits that ran out where more was estimated: taken as exact, they said long waits
    came early, and the predictions after them let in requests that then missed."""
    outcomes = Outcomes(quantile=0.7, near=0.5)
    for ratio, censored in [(0.5, False)] * 6 + [(0.6, True)] * 2 + [(1.0, False)] * 2:
        outcomes.add(Outcome(1.0, 1.0, ratio, True, None, censored, censored=censored))
    assert outcomes.correction() == 1.0
    assert quantile([0.5] * 6 + [0.6] * 2 + [1.0] * 2, 0.7) == 0.6  # as exact values


def test_the_correction_is_the_quantile_of_realized_over_estimated() -> None:
    outcomes = Outcomes(quantile=0.9, near=0.5)
    assert outcomes.correction() == 1.0  # nothing measured: the estimate as it is
    assert not outcomes.ready
    for ratio in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        outcomes.add(outcome(ratio * 2, estimate=2.0))
    assert outcomes.ready
    assert outcomes.correction() == pytest.approx(0.9)
    outcomes.add(outcome(20.0, estimate=2.0))  # one stalled request moves it to the next rank
    assert outcomes.correction() == pytest.approx(1.0)


def test_only_outcomes_near_the_slo_calibrate() -> None:
    """A short estimate is mostly an engine step's floor: lone requests came at 4x theirs
    on a fake engine, and that factor on 1.3 s slot waits refused what made the SLO."""
    outcomes = Outcomes(quantile=0.9, near=0.5)
    for _ in range(3 * MIN_OUTCOMES):
        outcomes.add(outcome(0.2, estimate=0.05))  # 4x, far from the SLO
    assert not outcomes.ready
    assert outcomes.correction() == 1.0
    for _ in range(MIN_OUTCOMES):
        outcomes.add(outcome(1.0, estimate=1.25))  # near it: at 0.8x
    assert outcomes.ready
    assert outcomes.correction() == pytest.approx(0.8)
    report = outcomes.report()
    assert report["near_slo"]["outcomes"] == MIN_OUTCOMES


def test_only_the_recent_outcomes_count() -> None:
    outcomes = Outcomes(quantile=0.5, near=0.5, window=MIN_OUTCOMES)
    for _ in range(MIN_OUTCOMES):
        outcomes.add(outcome(4.0))
    for _ in range(MIN_OUTCOMES):
        outcomes.add(outcome(0.5))  # the engine got faster
    assert outcomes.correction() == 0.5
    assert outcomes.recorded == 2 * MIN_OUTCOMES


def test_precision_and_recall_of_the_would_refuse_verdicts() -> None:
    outcomes = Outcomes(quantile=0.9, near=0.5)
    for realized, would_refuse in (
        (3.0, True),
        (3.0, True),
        (1.0, True),
        (3.0, False),
        (1.0, False),
    ):
        outcomes.add(outcome(realized, would_refuse=would_refuse))
    confusion = outcomes.confusion
    assert confusion.precision == pytest.approx(2 / 3)  # one would-refuse made the SLO
    assert confusion.recall == pytest.approx(2 / 3)  # one miss it let in
    report = outcomes.report()
    by_rule = {"curve": {"missed": 2, "made": 1}, "far": {"missed": 0, "made": 0}}
    by_rule["probe"] = by_rule["late"] = {"missed": 0, "made": 0}
    assert report["would_refuse"] == {
        "missed": 2,
        "made": 1,
        "precision": 0.667,
        "by_rule": by_rule,
    }
    assert (report["admitted_missed"], report["recall"], report["missed_slo"]) == (1, 0.667, 3)
    assert Outcomes(0.9, near=0.5).confusion.precision is None


def test_the_report_says_how_the_promise_fared() -> None:
    outcomes = Outcomes(quantile=0.9, near=0.5)
    for realized in (0.5, 0.8, 1.0, 1.5):
        outcomes.add(outcome(realized, predicted=1.0))
    report = outcomes.report()
    assert (report["ratio_p50"], report["ratio_p90"]) == (0.8, 1.5)
    assert report["within_prediction"] == 0.75
    assert outcomes.ratios.count == 4


def test_the_histogram_is_cumulative_with_an_infinite_bucket() -> None:
    histogram = Histogram(buckets=(0.5, 1.0))
    for value in (0.2, 0.7, 1.0, 3.0):
        histogram.observe(value)
    assert histogram.cumulative() == [("0.5", 1), ("1.0", 3), ("+Inf", 4)]
    assert histogram.total == pytest.approx(4.9)


def test_misses_without_a_queue_are_counted_apart() -> None:
    """A request let in on a free slot with nothing to read could not be refused: its miss
    is the engine's speed, not a refusal the prediction owed."""
    outcomes = Outcomes(quantile=0.9, near=0.5)
    outcomes.add(Outcome(2.5, 2.5, 3.0, queued=False, rule=None, missed=True))
    outcomes.add(Outcome(2.5, 2.5, 3.0, queued=True, rule=None, missed=True))
    gave_up = Outcome(2.5, 2.5, 2.0, queued=False, rule=None, missed=True, censored=True)
    outcomes.add(gave_up)
    report = outcomes.report()
    assert (report["admitted_missed"], report["admitted_missed_unqueued"]) == (3, 1)
