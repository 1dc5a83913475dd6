"""The miss curve: how often requests estimated alike missed the SLO, never falling as the
estimate grows, and no confidence from a handful."""

from __future__ import annotations

import pytest

from kefu.errors import Overloaded
from kefu.limits.admission import Admission
from kefu.limits.miss_curve import MISS_CONFIDENCE, MissCurve
from kefu.limits.outcomes import MIN_OUTCOMES, Outcome

pytestmark = pytest.mark.anyio


def test_the_curve_pools_what_would_fall_and_shrinks_small_blocks() -> None:
    curve = MissCurve([(1.0, False), (2.0, True), (3.0, False), (4.0, True), (5.0, True)])
    assert curve(0.5) == pytest.approx(1 / 3)  # below them all: the first block, (0+1)/(1+2)
    assert curve(1.5) == pytest.approx(1 / 3)  # between two blocks: the lower one
    assert curve(2.0) == pytest.approx(0.5)  # 2 s missed, 3 s made: pooled, (1+1)/(2+2)
    assert curve(3.9) == pytest.approx(0.5)
    assert curve(4.5) == pytest.approx(0.75)
    assert curve(60.0) == pytest.approx(0.75)  # past them all: the last block
    assert MissCurve([])(3.0) == 0.5  # no outcome, no opinion


def test_outcomes_of_one_estimate_are_one_point() -> None:
    curve = MissCurve([(2.0, False), (2.0, True), (2.0, True), (2.0, True)])
    assert curve(2.0) == pytest.approx(4 / 6)


def test_a_handful_of_misses_is_no_confidence() -> None:
    assert MissCurve([(3.0, True)] * 3)(3.0) == pytest.approx(0.8)
    assert MissCurve([(3.0, True)] * 7)(3.0) < MISS_CONFIDENCE
    assert MissCurve([(3.0, True)] * 9)(3.0) > MISS_CONFIDENCE


def outcome(estimate: float, *, missed: bool) -> Outcome:
    return Outcome(estimate, estimate, estimate, queued=True, rule=None, missed=missed)


async def test_past_the_slo_a_refusal_needs_the_outcomes_to_say_such_requests_missed() -> None:
    """Calibrated by requests estimated at 1-3 s that all made a 2 s SLO: a request
    estimated at 3 s is let in; once requests estimated so mostly missed, it is refused."""
    admission = Admission(slots=1, max_waiting=4, timeout=30.0, ttft_slo=2.0, policy="predicted")
    admission.rate.reading.add(10, 0.5)
    admission.rate.record(3.0)  # a hold lasts 3 s
    for index in range(MIN_OUTCOMES):
        admission.outcomes.add(outcome(1.0 + 2.0 * index / MIN_OUTCOMES, missed=False))
    assert admission.outcomes.ready
    async with admission.slot(tokens=10):  # just begun: the slot frees in about 3 s
        judged = admission.judge(tokens=10)
        assert judged.queued
        assert judged.predicted > admission.ttft_slo
        assert not judged.refuse  # requests estimated alike made it
        for _ in range(MIN_OUTCOMES):
            admission.outcomes.add(outcome(3.2, missed=True))
        assert admission.judge(tokens=10).refuse  # now they mostly missed
        with pytest.raises(Overloaded):
            admission.check()


def test_reaching_counts_the_outcomes_estimated_at_least_that_long() -> None:
    curve = MissCurve([(1.0, False), (2.0, True), (2.0, False), (3.0, True)])
    assert [curve.reaching(e) for e in (0.5, 1.0, 1.5, 2.0, 3.0, 3.5)] == [4, 4, 3, 3, 1, 0]
    assert MissCurve([]).reaching(1.0) == 0


def test_block_says_what_a_share_stands_on() -> None:
    curve = MissCurve([(1.0, False), (2.0, True), (3.0, False), (4.0, True), (4.0, True)])
    assert curve.block(2.5) == (1, 2)  # 2 s missed, 3 s made: one block
    assert curve.block(4.0) == (2, 2)
    assert curve.block(0.5) == (0, 1)  # below them all: the first block
    assert MissCurve([]).block(1.0) == (0, 0)
