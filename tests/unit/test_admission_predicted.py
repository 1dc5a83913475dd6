"""Admission by prediction: the measured rates estimate, the outcomes correct, and only a
calibrated prediction with a queue in front of it refuses; on a clock the test sets (no
sleeping, no timing asserted)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kefu.errors import Overloaded, QueueFull, QueueTimeout
from kefu.limits.admission import Admission
from kefu.limits.outcomes import MIN_OUTCOMES, Outcome
from kefu.limits.rates import LATENESS_MIN, Ewma, Lateness, ServiceRate
from tests.http.helpers import calibrate

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def predicted(clock: Clock, **kwargs: object) -> Admission:
    options: dict[str, object] = {"slots": 8, "max_waiting": 100, "timeout": 10}
    options |= {"ttft_slo": 2.0, "policy": "predicted", "clock": clock} | kwargs
    return Admission(**options)  # type: ignore[arg-type]


def measured_line(admission: Admission) -> None:
    """An engine that reads a cached prompt in 0.2 s and 300 more tokens in 1.5 s more:
    0.195 s + 5 ms a token, and a typical prompt of 61 tokens (0.5 s)."""
    reading = admission.rate.reading
    for tokens, seconds in ((1, 0.2), (301, 1.7)):
        reading.add(tokens, seconds)
        reading.observe(tokens)


async def complete(admission: Admission, clock: Clock, *, service: float, first: float) -> None:
    """One request that holds its slot ``service`` seconds, its first token at ``first``."""
    async with admission.slot(tokens=1) as hold:
        clock.now += first
        admission.first_token(hold)
        clock.now += service - first


class Held:
    """Requests holding slots until ``release``."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.gate = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def hold(self, count: int = 1, *, read: bool = True, tokens: int | None = None) -> None:
        for _ in range(count):
            self.tasks.append(asyncio.create_task(self._one(read, tokens)))
        await asyncio.sleep(0)

    async def _one(self, read: bool, tokens: int | None) -> None:
        async with self.admission.slot(tokens=tokens) as hold:
            if read:
                self.admission.first_token(hold)
            await self.gate.wait()

    async def release(self) -> None:
        self.gate.set()
        await asyncio.gather(*self.tasks)


def test_ewma_starts_at_the_first_sample_and_follows() -> None:
    mean = Ewma(weight=0.5)
    assert mean.value is None
    mean.add(4.0)
    assert mean.value == 4.0
    mean.add(2.0)
    assert mean.value == 3.0
    mean.add(-1.0)  # a clock step back counts as nothing, not as negative time
    assert mean.value == 1.5


async def test_a_fresh_server_refuses_only_far_past_the_slo_until_outcomes_calibrate() -> None:
    """No outcome yet: an estimate is the model's guess, not the engine's word, and refuses
    only past twice the SLO (a fresh server refused 31 of 32 requests it then served inside
    the SLO); between the SLO and twice it, one probe at a time is let in to find out. Once
    outcomes near the SLO have calibrated it, past the SLO is enough."""
    clock = Clock()
    admission = predicted(clock, slots=4)
    measured_line(admission)  # 1.195 s for a 200-token prompt
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(admission.slot(tokens=200))
        probe = await stack.enter_async_context(admission.slot(tokens=200))
        assert probe.judgement is not None
        assert probe.judgement.estimate == pytest.approx(2 * 1.195)  # past 2 s, within 4 s
        assert probe.judgement.probe
        assert not probe.judgement.refuse
        with pytest.raises(Overloaded):  # past the SLO too, while the probe is out
            await stack.enter_async_context(admission.slot(tokens=1))
        for hold in (first, probe):  # each read in 1.195 s, as the line says
            clock.now += 1.195
            admission.first_token(hold)  # the probe's outcome came: another may go
        await stack.enter_async_context(admission.slot(tokens=200))
        second = await stack.enter_async_context(admission.slot(tokens=200))
        assert second.judgement is not None
        assert second.judgement.probe
        clock.now += 1.195
        admission.first_token(second)  # read in 1.195 s; the one ahead of it is not yet
        judgement = admission.judge(tokens=400)  # 2.195 s: the next probe
        assert judgement.probe
        assert not judgement.refuse
        far = admission.judge(tokens=1000)  # 5.195 s: past 4 s, on itself
        assert far.refuse
        assert not far.probe
    admission = predicted(clock, slots=4)  # the probes' own outcomes left behind
    measured_line(admission)
    reading = admission.rate.reading
    calibrate(admission)
    held = Held(admission)
    await held.hold(1, read=False, tokens=300)
    judgement = admission.judge()
    assert judgement.predicted == pytest.approx(1.695 + reading.seconds(reading.typical))
    assert judgement.refuse  # calibrated: past the SLO is enough
    assert not judgement.probe
    await held.release()


async def test_the_miss_curve_refuses_where_its_outcomes_reach_twice_the_slo_beyond() -> None:
    """Calibrated: a prediction past twice the SLO is refused on itself only where too few
    outcomes were estimated that long; where they were, their misses decide (a q90
    correction of 2.5 put 2.8 s estimates past 4 s, and many of those made the SLO)."""
    admission = predicted(Clock())
    outcomes = admission.outcomes
    for index in range(4 * MIN_OUTCOMES):  # at 2.8 s estimated, one in four missed
        missed = index % 4 == 0
        outcomes.add(Outcome(2.8, 7.0, 2.5 if missed else 1.5, True, None, missed))
    assert outcomes.ready
    rule, missed_alike = outcomes.refusal(2.8, 7.0, 2.0)
    assert rule is None  # the curve saw them make it
    assert missed_alike == pytest.approx((8 + 1) / (32 + 2))  # shrunk towards one half
    assert outcomes.refusal(3.5, 8.75, 2.0)[0] == "far"  # no outcome this long
    assert outcomes.refusal(3.5, 3.9, 2.0)[0] is None  # within twice it, no evidence


async def test_an_estimate_made_before_any_prompt_was_read_is_no_prediction() -> None:
    """With no reading measured, the estimate is the time spent so far: its outcome would
    teach the correction a ratio of thousands (a fresh server then refused nearly all)."""
    clock = Clock()
    admission = predicted(clock)
    async with admission.slot(tokens=50, received=clock.now - 0.001) as hold:
        assert hold.judgement is not None
        assert not hold.judgement.measured
        clock.now += 0.8
        admission.first_token(hold)
    assert admission.outcomes.recorded == 0
    assert admission.rate.reading.samples == 1  # the engine measured: the next one counts
    async with admission.slot(tokens=50) as hold:
        clock.now += 0.8
        admission.first_token(hold)
    assert admission.outcomes.recorded == 1
    assert admission.outcomes.correction() == pytest.approx(1.0)


async def test_an_engine_with_a_free_slot_and_nothing_to_read_takes_any_request() -> None:
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    calibrate(admission, ratio=10.0)  # predictions ten times too low, recently
    judgement = admission.judge(tokens=2000, received=clock.now - 5)
    assert judgement.predicted > 2.0
    assert not judgement.queued
    assert not judgement.refuse
    async with admission.slot(tokens=2000, received=clock.now - 5) as hold:
        assert hold.judgement == judgement


async def test_the_outcomes_correct_the_estimate() -> None:
    """An engine that reads several prompts in one step starts them faster than prompts
    read one after another would: the ratio of what happened to the estimate shows it."""
    clock = Clock()
    admission = predicted(clock, ttft_slo=3.5)
    measured_line(admission)
    held = Held(admission)
    await held.hold(2, read=False, tokens=300)  # two long prompts ahead: 3.4 s
    reading = admission.rate.reading
    estimate = admission.judge().estimate
    assert estimate == pytest.approx(2 * 1.695 + reading.seconds(reading.typical))
    assert admission.judge().predicted == pytest.approx(estimate)  # no outcome: as is
    assert not admission.judge().refuse  # not calibrated yet: a probe
    calibrate(admission, ratio=0.25)  # they came at a quarter of the estimate
    assert admission.outcomes.correction() == pytest.approx(0.25)
    assert admission.judge().predicted == pytest.approx(estimate / 4)
    assert admission.refusal() is None  # 1 s: within the SLO of 3.5 s
    calibrate(admission, ratio=1.0)  # the p90 of 8 at 0.25 and 8 at 1.0: 1.0
    assert admission.outcomes.correction() == 1.0
    assert isinstance(admission.refusal(), Overloaded)
    await held.release()


async def test_refuses_at_once_what_the_calibrated_prediction_puts_past_the_slo() -> None:
    clock = Clock()
    admission = predicted(clock, slots=2, ttft_slo=3.0)
    await complete(admission, clock, service=4.0, first=0.5)  # a reply holds its slot 4 s
    admission.rate.reading.add(1, 0.5)  # and a prompt reads in 0.5 s
    calibrate(admission)
    assert admission.predicted_ttft() == pytest.approx(0.5)  # a slot is free
    held = Held(admission)
    await held.hold()
    clock.now += 1.0
    await held.hold()
    clock.now += 2.0  # 3 s and 2 s into their holds: slots free in 1 s and in 2 s
    assert admission.predicted_ttft() == pytest.approx(1.5)
    lined = [asyncio.create_task(held._one(True, None))]
    await asyncio.sleep(0)
    assert admission.predicted_ttft() == pytest.approx(2.5)  # the second slot to free
    lined.append(asyncio.create_task(held._one(True, None)))
    await asyncio.sleep(0)
    assert admission.waiting == 2
    # The one after: the first slot's next round, 1 + 4 s, then its prompt: past 3 s.
    with pytest.raises(Overloaded) as info:
        async with admission.slot():
            pytest.fail("must not be admitted")
    assert info.value.retry_after == pytest.approx(2.5)  # the excess over the SLO
    assert "5.5 s" in info.value.message
    assert admission.refused == {"overloaded": 1, "queue_full": 0, "queue_timeout": 0}
    assert admission.refused_with_free_slot["overloaded"] == 0
    await held.release()
    await asyncio.gather(*lined)


async def test_retry_after_is_at_least_a_second() -> None:
    clock = Clock()
    admission = predicted(clock, slots=1, ttft_slo=0.1)
    await complete(admission, clock, service=0.15, first=0.05)
    calibrate(admission)
    async with admission.slot():
        with pytest.raises(Overloaded) as info:  # 0.15 s for the slot > 0.1 s
            async with admission.slot():
                pytest.fail("must not be admitted")
    assert info.value.retry_after == 1.0


async def test_shadow_admits_and_records_what_it_would_have_refused() -> None:
    clock = Clock()
    admission = predicted(clock, slots=1, shadow=True)
    await complete(admission, clock, service=10.0, first=0.1)
    calibrate(admission)
    async with admission.slot() as running:
        ticket = admission.check()  # 10 s for the slot: predicted would refuse it
        assert ticket.judgement is not None
        assert ticket.judgement.refuse
        assert admission.refused["overloaded"] == 0
        waiting = asyncio.create_task(slot_then_first_token(admission, ticket, clock))
        await asyncio.sleep(0)
        assert admission.waiting == 1
        admission.first_token(running)
        clock.now += 3.0  # the running reply ends 3 s later: the waiting one missed
    await waiting
    confusion = admission.outcomes.confusion
    assert (confusion.refused_missed, confusion.refused_made) == (1, 0)
    assert confusion.precision == 1.0
    assert confusion.recall == 1.0
    report = admission.report()
    predictions = report["predictions"]
    assert isinstance(predictions, dict)
    by_rule = {"curve": {"missed": 1, "made": 0}, "far": {"missed": 0, "made": 0}}
    by_rule["probe"] = by_rule["late"] = {"missed": 0, "made": 0}
    would_refuse = {"missed": 1, "made": 0, "precision": 1.0, "by_rule": by_rule}
    assert predictions["would_refuse"] == would_refuse  # the miss curve refused it


async def slot_then_first_token(
    admission: Admission, ticket: object, clock: Clock, tokens: int | None = None
) -> None:
    async with admission.slot(ticket, tokens=tokens) as hold:  # type: ignore[arg-type]
        admission.first_token(hold)


async def test_policy_queue_predicts_and_records_but_never_refuses_on_it() -> None:
    clock = Clock()
    admission = predicted(clock, slots=1, max_waiting=1, policy="queue")
    assert admission.wait_limit == 10  # --queue-timeout, not the SLO
    await complete(admission, clock, service=100.0, first=50.0)
    calibrate(admission)
    held = Held(admission)
    await held.hold()
    second = asyncio.create_task(held._one(True, None))  # waits, however long predicted
    await asyncio.sleep(0)
    assert admission.waiting == 1
    with pytest.raises(QueueFull) as info:
        async with admission.slot():
            pytest.fail("must not be admitted")
    assert info.value.retry_after == 100.0  # one slot's turn at the measured rate
    await held.release()
    await second
    # The first request was judged before any prompt was read: no prediction to record.
    assert admission.outcomes.recorded == 2 * MIN_OUTCOMES + 2  # calibrate's, and these two


async def test_under_predicted_nobody_waits_past_the_moment_it_could_make_the_slo() -> None:
    """A wrong prediction costs the customer less than the SLO, not --queue-timeout: a
    request leaves the line when its own prompt's reading would no longer fit in the SLO.
    That is a refusal: a censored miss for the curve, not an admitted request's outcome."""
    admission = Admission(slots=1, max_waiting=4, timeout=30.0, ttft_slo=0.05, policy="predicted")
    assert admission.wait_limit == 0.05
    admission.rate.reading.add(10, 0.01)  # 10 tokens in 10 ms: 1 ms a token
    async with admission.slot() as hold:
        admission.first_token(hold)
        with pytest.raises(QueueTimeout) as info:
            async with admission.slot(tokens=20):  # 20 ms to read: gone after 30 ms
                pytest.fail("must not be admitted")
    waited = float(info.value.message.split("within ")[1].split(" s")[0])
    assert 0.02 < waited <= 0.03  # the clock runs: a little under 30 ms by then
    assert admission.refused["queue_timeout"] == 1
    turned_away = admission.outcomes.recent[-1]
    assert turned_away.refused
    assert turned_away.censored
    assert turned_away.missed
    assert 0.02 <= turned_away.realized < 0.05
    assert admission.outcomes.confusion.admitted_missed == 0


async def test_under_predicted_a_request_no_slot_could_start_in_time_is_refused_at_once() -> None:
    """Its own prompt alone takes longer than the SLO leaves: it does not wait for nothing,
    and the refusal says why, not "no capacity freed up within 0 s"."""
    admission = Admission(slots=1, max_waiting=4, timeout=30.0, ttft_slo=0.05, policy="predicted")
    admission.rate.reading.add(10, 0.01)
    async with admission.slot() as hold:
        admission.first_token(hold)
        with pytest.raises(Overloaded) as info:
            async with admission.slot(tokens=60):  # 60 ms to read, 50 ms to the SLO
                pytest.fail("must not be admitted")
    assert "no slot is free" in info.value.message
    assert "60-token prompt" in info.value.message
    assert admission.refused["overloaded"] == 1
    assert admission.refused["queue_timeout"] == 0
    assert admission.outcomes.recent[-1].refused  # the curve learns it would have missed


async def test_shadow_records_a_slot_that_came_past_the_deadline_under_rule_late() -> None:
    """Shadow waits the SLO, and where its slot came later than ``predicted`` would have
    let it wait, the outcome is the deadline's: here the first token still came in time,
    a refusal ``late`` would have turned away one that made it."""
    clock = Clock()
    admission = predicted(clock, slots=1, shadow=True)
    measured_line(admission)  # 0.195 s + 5 ms a token
    for wait in (0.9, 0.5):
        async with admission.slot(tokens=1) as running:
            admission.first_token(running)
            # 1.2 s to read (at first): its deadline is 0.8 s after it came
            waiting = asyncio.create_task(slot_then_first_token(admission, None, clock, tokens=201))
            await asyncio.sleep(0)
            assert admission.waiting == 1
            clock.now += wait  # the running reply ends: its slot, its first token at once
        await waiting
    by_rule = admission.outcomes.confusion.by_rule
    # 0.9 s: past its deadline and still in time, a refusal that would have turned away
    # one that made it; 0.5 s: within it.
    assert by_rule["late"] == [0, 1]
    assert [o.rule for o in admission.outcomes.recent if o.queued] == ["late", None]
    assert admission.refused["queue_timeout"] == 0


async def test_a_request_waits_less_by_how_late_first_tokens_come_after_their_slots() -> None:
    """The reading line is fitted to prompts read one after another; a first token comes
    later after its slot (the step it joins, the decodes beside it): the recent lateness
    shortens the wait, once there is enough of it."""
    admission = Admission(slots=1, max_waiting=4, timeout=30.0, ttft_slo=0.05, policy="predicted")
    admission.rate.reading.add(10, 0.01)
    for _ in range(LATENESS_MIN - 1):
        admission.rate.lateness.add(0.01)
    assert admission.rate.lateness.margin(0.95) == 0.0  # too few to say
    admission.rate.lateness.add(0.01)
    assert admission.rate.lateness.margin(0.95) == 0.01
    async with admission.slot() as hold:
        admission.first_token(hold)
        with pytest.raises(QueueTimeout) as info:
            async with admission.slot(tokens=20):  # 20 ms to read, 10 ms late: 20 ms left
                pytest.fail("must not be admitted")
    waited = float(info.value.message.split("within ")[1].split(" s")[0])
    assert 0.01 < waited <= 0.02  # the clock runs: a little under 20 ms by then


def test_the_deadline_allows_for_the_lateness_of_prompts_granted_alone() -> None:
    """A prompt granted beside others still being read waits for them too (a fresh
    server's burst); a request from the line mostly takes a freed slot alone: its
    deadline allows for that lateness, and for every grant's only until enough came alone."""
    lateness = Lateness()
    for _ in range(LATENESS_MIN):
        lateness.add(1.0, alone=False)
    assert lateness.margin(0.5) == 1.0  # none alone yet: every grant says it
    for _ in range(LATENESS_MIN - 1):
        lateness.add(0.01)
    assert lateness.margin(0.5) == 1.0
    lateness.add(0.01)
    assert lateness.margin(0.5) == 0.01
    assert lateness.margin(0.95) == 0.01


async def test_a_slot_granted_while_another_prompt_is_read_is_not_alone() -> None:
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    async with admission.slot(tokens=10) as first, admission.slot(tokens=10) as beside:
        admission.first_token(first)
        admission.first_token(beside)
        async with admission.slot(tokens=10) as after:  # nothing is being read now
            admission.first_token(after)
    assert (first.alone, beside.alone, after.alone) == (True, False, True)


async def test_shadow_waits_the_slo_itself() -> None:
    """Shadow measures: a request leaves the line at the SLO, a miss beyond doubt."""
    admission = Admission(
        slots=1, max_waiting=4, timeout=30.0, ttft_slo=0.05, policy="predicted", shadow=True
    )
    admission.rate.reading.add(10, 0.01)
    async with admission.slot() as hold:
        admission.first_token(hold)
        with pytest.raises(QueueTimeout) as info:
            async with admission.slot(tokens=20):
                pytest.fail("must not be admitted")
    assert "0.05 s" in info.value.message
    gave_up = admission.outcomes.recent[-1]
    assert gave_up.realized >= 0.05
    assert gave_up.rule == "late"  # ``predicted`` would have let it go sooner
    assert gave_up.missed


async def test_each_admitted_prediction_is_recorded_beside_its_outcome() -> None:
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    async with admission.slot(tokens=101, received=clock.now - 0.1) as hold:
        assert hold.judgement is not None
        assert hold.judgement.estimate == pytest.approx(0.1 + 0.195 + 0.505)
        clock.now += 1.6
        admission.first_token(hold)
        clock.now += 5.0
        admission.first_token(hold)  # later tokens are not first tokens
    (outcome,) = admission.outcomes.recent
    assert outcome.realized == pytest.approx(1.7)
    assert outcome.predicted == pytest.approx(0.8)
    assert not outcome.missed
    assert not outcome.queued
    report = admission.outcomes.report()
    assert report["ratio_p50"] == pytest.approx(1.7 / 0.8, abs=0.001)
    assert report["within_prediction"] == 0.0
    assert admission.outcomes.ratios.count == 1
    assert admission.rate.completed == 1


async def test_a_prompt_read_longer_than_the_line_says_slows_the_estimate() -> None:
    """A stalled engine is not described by its past: the prompt being read stands in."""
    clock = Clock()
    admission = predicted(clock, slots=4)
    measured_line(admission)
    calibrate(admission)
    reading = admission.rate.reading
    async with admission.slot(tokens=101):  # 0.7 s by the line
        typical = reading.seconds(reading.typical)  # 69 tokens: 0.54 s
        assert admission.predicted_ttft() == pytest.approx(0.7 + typical)
        clock.now += 1.4  # read for twice as long as the line says
        assert admission.predicted_ttft() == pytest.approx(typical * 2)
        assert admission.refusal() is None
        clock.now += 2.8  # six times: the engine has stalled
        assert admission.predicted_ttft() == pytest.approx(typical * 6)
        assert isinstance(admission.refusal(), Overloaded)


async def test_a_prompt_read_after_the_one_before_it_counts_from_that_one() -> None:
    """The engine reads prompts in turn: the second's sample starts at the first's token."""
    clock = Clock()
    admission = predicted(clock, slots=2)
    async with admission.slot(tokens=100) as first, admission.slot(tokens=100) as second:
        clock.now += 0.9
        admission.first_token(first)
        clock.now += 0.8
        admission.first_token(second)
    assert admission.rate.reading.seconds(100) == pytest.approx(0.85, abs=0.01)  # not 1.7


async def test_the_slot_wait_counts_where_each_running_reply_is() -> None:
    clock = Clock()
    admission = predicted(clock, slots=2, ttft_slo=3.0)
    held = Held(admission)
    await held.hold(2)
    assert admission.predicted_ttft() == 0.0  # running for 0 s: no evidence yet
    clock.now += 4.0  # neither has finished in 4 s: each may run as long again
    assert admission.predicted_ttft() == 4.0
    await held.release()
    admission = predicted(clock, slots=2, ttft_slo=3.0)
    await complete(admission, clock, service=2.0, first=0.0)
    await complete(admission, clock, service=6.0, first=0.0)
    assert admission.rate.service.value == pytest.approx(2.8)
    held = Held(admission)
    await held.hold()
    clock.now += 2.0
    await held.hold()
    assert admission.predicted_ttft() == pytest.approx(0.8)  # the older one's mean end
    clock.now += 1.0
    assert admission.predicted_ttft() == pytest.approx(0.0)  # past it: any moment now
    await held.release()


def test_a_request_ahead_that_gives_up_first_leaves_its_slot_to_the_next() -> None:
    """A line of requests about to give up is shorter than it looks: each takes a slot
    only if it is still waiting when one frees."""
    rate = ServiceRate()
    rate.record(4.0)
    assert rate.slot_wait([], frees=[3.0]) == 3.0
    assert rate.slot_wait([5.0], frees=[3.0]) == 7.0  # served at 3 s, its slot free 4 s on
    assert rate.slot_wait([2.0], frees=[3.0]) == 3.0  # gone at 2 s: the slot at 3 s is ours
    assert rate.slot_wait([2.0, 5.0], frees=[3.0, 4.0]) == 4.0  # the second takes the 3 s one
    assert rate.slot_wait([], frees=[]) == 0.0


def test_a_running_reply_frees_its_slot_after_the_tokens_it_has_still_to_send() -> None:
    """Replies of 10, 20 and 60 tokens: one 15 tokens in has 5 or 45 to go (25 on
    average), one 30 tokens in has 30; the same age says nothing more than a mean hold."""
    rate = ServiceRate()
    for tokens, held in ((10, 1.0), (20, 2.0), (60, 6.0)):
        rate.record(held, tokens)
    rate.token_gap.add(0.1)
    assert rate.frees_in(1.5, emitted=15) == pytest.approx(2.5)
    assert rate.frees_in(1.5, emitted=30) == pytest.approx(3.0)
    assert rate.frees_in(1.5, emitted=30, limit=40) == pytest.approx(1.0)  # stops at 40
    assert rate.frees_in(1.5, emitted=70, limit=100) == pytest.approx(1.5)  # past them all
    assert rate.frees_in(1.5, emitted=70) == pytest.approx(1.75)  # no limit: a quarter more
    assert rate.frees_in(1.5, emitted=41, limit=40) == pytest.approx(0.1)  # a closing delta
    assert rate.frees_in(1.5) == pytest.approx(2.16 - 1.5)  # no token yet: a mean hold left
    fresh = ServiceRate()
    assert fresh.frees_in(1.5, emitted=3) == 1.5  # nothing completed: as long again


async def test_each_token_of_a_held_reply_is_counted() -> None:
    """Each token of a held reply counts towards its length and the gap between tokens;
    a completed reply's length joins those a running one is measured against."""
    clock = Clock()
    admission = predicted(clock)
    async with admission.slot(tokens=10) as hold:
        for _ in range(3):
            clock.now += 0.05
            admission.token(hold)
        assert hold.first_token is not None
        assert hold.emitted == 3
        assert admission.rate.token_gap.value == pytest.approx(0.05)
    assert len(admission.rate.lengths) == 1


async def test_a_long_prompt_is_refused_at_its_slot_where_a_short_one_is_taken() -> None:
    """The door judged a typical prompt; at its slot a built prompt is judged by the tokens
    it leaves to read, and by the time its request has already spent."""
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    calibrate(admission)
    async with admission.slot(tokens=100) as ahead:  # one prompt being read: a queue
        received = clock.now - 0.1
        with pytest.raises(Overloaded) as info:  # 0.1 + 0.695 + (0.195 + 2 s)
            async with admission.slot(tokens=400, received=received):
                pytest.fail("must not be admitted")
        assert "400-token prompt" in str(info.value)
        assert admission.refused_with_free_slot["overloaded"] == 1
        assert admission.refusals[-1].reading  # a slot free, but a prompt ahead to read
        refusals = admission.report()["refusals"]
        assert isinstance(refusals, dict)
        assert refusals["with_room"] == 0
        async with admission.slot(tokens=50, received=received) as short:  # 1.24 s
            assert short.tokens == 50
        with pytest.raises(Overloaded):  # the same short one after 1.5 s on its way
            async with admission.slot(tokens=50, received=clock.now - 1.5):
                pytest.fail("must not be admitted")
        admission.first_token(ahead)


async def test_a_ticket_counts_as_a_prompt_ahead_until_its_slot_takes_it() -> None:
    """A burst all passed the door before the first took its slot, built its prompts, and
    was refused at the slots: a request let through counts at once."""
    clock = Clock()
    admission = predicted(clock, ttft_slo=1.2)
    measured_line(admission)
    calibrate(admission)
    first = admission.check()  # an idle engine: let through
    assert first.judgement is not None
    assert not first.judgement.queued
    second = admission.check()  # one typical prompt ahead: 1.0 s fits 1.2 s
    assert second.judgement is not None
    assert second.judgement.queued
    assert admission.reading == 2
    with pytest.raises(Overloaded):  # two ahead: 1.5 s
        admission.check()
    async with admission.slot(first):  # judged at the door, not anew (anew: refused)
        assert admission.running == 1
        assert admission.reading == 2  # its prompt unread, and the second's ticket
        admission.release(second)  # the second's client left before its slot
        assert admission.reading == 1
    assert admission.refused["overloaded"] == 1


async def test_a_slot_counts_only_the_tickets_given_before_its_own() -> None:
    """A request let through first is read first: the tickets given after its own (their
    requests still deciding or building prompts) are behind it, not ahead."""
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    calibrate(admission)
    first = admission.check()
    later = [admission.check() for _ in range(2)]
    assert admission.reading == 3
    async with admission.slot(first, tokens=301) as hold:  # 1.7 s, not 2.7 s behind them
        assert hold.judgement is not None
        assert not hold.judgement.queued
        assert hold.judgement.estimate == pytest.approx(1.7)
    for ticket in later:
        admission.release(ticket)


async def test_a_tentative_ticket_counts_as_the_share_that_went_on_to_a_slot() -> None:
    """Tickets held while the fast path decides: most of a shop's messages are answered
    without the engine, and a burst of first messages counted whole refused the few
    that were not."""
    clock = Clock()
    admission = predicted(clock, ttft_slo=1.2)
    measured_line(admission)
    calibrate(admission)
    deciding = admission.ticket_if_free()
    assert deciding is not None
    assert deciding.tentative
    assert admission.judge().estimate == pytest.approx(1.0)  # whole until one has ended
    admission.release(deciding)  # answered without the engine
    for _ in range(3):
        ticket = admission.ticket_if_free()
        assert ticket is not None
        admission.release(ticket)
    taken = admission.ticket_if_free()
    assert taken is not None
    async with admission.slot(taken):  # one of five went on to a slot: share 0.2
        pass
    share = admission.tickets.taken_share.value
    assert share is not None
    assert share == pytest.approx(0.2)
    held = [admission.ticket_if_free() for _ in range(3)]
    assert all(ticket is not None for ticket in held)
    # Three deciding ahead count as 0.6 of a typical prompt (0.5 s each), not 1.5 s.
    assert admission.judge().estimate == pytest.approx(0.5 + 3 * share * 0.5)
    firm = admission.check()  # one whose message needs the engine counts whole
    assert admission.judge().estimate == pytest.approx(0.5 + (3 * share + 1) * 0.5)
    admission.release(firm)


async def test_check_refuses_now_what_slot_would_and_asking_counts_nothing() -> None:
    clock = Clock()
    admission = predicted(clock, slots=1)
    assert admission.refusal() is None
    admission.release(admission.check())  # a free slot: nothing to refuse, no slot taken
    assert admission.running == 0
    await complete(admission, clock, service=10.0, first=1.0)
    calibrate(admission)
    async with admission.slot():
        assert isinstance(admission.refusal(), Overloaded)
        assert admission.ticket_if_free() is None
        assert admission.refused["overloaded"] == 0
        with pytest.raises(Overloaded):
            admission.check()
        assert admission.refused["overloaded"] == 1
        assert (admission.running, admission.waiting) == (1, 0)


async def test_the_door_gives_back_a_ticket_whose_request_ends_before_its_slot() -> None:
    admission = Admission(slots=1, max_waiting=0, timeout=10, policy="predicted")
    with contextlib.suppress(KeyError), admission.door():
        assert admission.reading == 1
        raise KeyError("the prompt could not be built")
    assert admission.reading == 0
    with admission.door() as ticket:
        async with admission.slot(ticket):
            assert admission.reading == 1  # the hold's prompt, the ticket gone
        admission.release(ticket)  # taken already: nothing to give back
    assert admission.reading == 0


async def test_requests_cut_short_measure_no_service_time() -> None:
    clock = Clock()
    admission = predicted(clock, slots=1)
    with contextlib.suppress(KeyError):
        async with admission.slot():
            clock.now += 0.01
            raise KeyError("client left")
    assert admission.rate.completed == 0
    assert admission.outcomes.recorded == 0  # no first token, no outcome
    assert admission.running == 0


async def test_refusals_say_whether_a_slot_was_free_and_when() -> None:
    clock = Clock()
    admission = predicted(clock, slots=1, max_waiting=0)
    async with admission.slot() as hold:
        admission.first_token(hold)
        with pytest.raises(QueueFull):
            admission.check()
    (refusal,) = admission.refusals
    assert (refusal.code, refusal.slot_free) == ("queue_full", False)
    report = admission.report(since=refusal.at + 1)
    none = {"total": 0, "by_code": {}, "with_free_slot": 0, "with_room": 0}
    assert report["refusals"] == none
    assert admission.report()["refusals"] == {
        "total": 1,
        "by_code": {"queue_full": 1},
        "with_free_slot": 0,
        "with_room": 0,
    }
