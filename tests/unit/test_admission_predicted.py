"""Admission by predicted wait: the measured service rate and the line ahead decide, on a
clock the test sets (no sleeping, no timing asserted)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kefu.errors import Overloaded, QueueFull, QueueTimeout
from kefu.limits.admission import Admission
from kefu.limits.rates import Ewma, ServiceRate

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def steady(admission: Admission) -> None:
    """An engine whose prompts all read alike and whose replies all hold their slots alike:
    no spread, the estimates are the means."""
    admission.rate.prefill.deviation = 0.0
    admission.rate.service.deviation = 0.0


async def complete(admission: Admission, clock: Clock, *, service: float, first: float) -> None:
    """One request that holds its slot ``service`` seconds, its first token at ``first``."""
    async with admission.slot() as hold:
        clock.now += first
        admission.first_token(hold)
        clock.now += service - first


def test_ewma_starts_at_the_first_sample_and_follows() -> None:
    mean = Ewma(weight=0.5)
    assert mean.value is None
    mean.add(4.0)
    assert mean.value == 4.0
    mean.add(2.0)
    assert mean.value == 3.0
    mean.add(-1.0)  # a clock step back counts as nothing, not as negative time
    assert mean.value == 1.5


def test_ewma_upper_bound_allows_for_the_spread_seen() -> None:
    assert Ewma().upper is None
    mean = Ewma(weight=0.5)
    mean.add(4.0)  # one sample: a spread of half of it is assumed (RFC 6298)
    assert (mean.value, mean.deviation, mean.upper) == (4.0, 2.0, 10.0)
    mean.add(4.0)  # the same again: the assumed spread halves
    assert (mean.deviation, mean.upper) == (1.0, 7.0)
    mean.add(8.0)  # 4 over the mean: the spread grows, the bound more than the mean
    assert (mean.value, mean.deviation, mean.upper) == (6.0, 2.5, 13.5)


def test_prediction_is_the_line_ahead_over_the_completion_rate() -> None:
    rate = ServiceRate(weight=1.0)
    assert rate.predicted_ttft(ahead=0, slots=4, slot_free=False) is None
    rate.record(8.0)  # 8 s held
    rate.service.deviation = 0.0  # every reply alike
    rate.prefill.add(0.5)  # 0.5 s to read a prompt, twice: no spread
    rate.prefill.add(0.5)
    # A free slot: only the first token's wait.
    assert rate.predicted_ttft(ahead=5, slots=4, slot_free=True) == 0.5
    # All busy: a slot frees every 8/4 = 2 s; third in line starts after 3 of them.
    assert rate.predicted_ttft(ahead=2, slots=4, slot_free=False) == 3 * 2.0 + 0.5
    assert rate.completed == 1


async def test_before_any_completion_the_oldest_running_age_stands_in() -> None:
    clock = Clock()
    admission = Admission(slots=2, max_waiting=100, timeout=10, ttft_slo=3.0, clock=clock)
    gate = asyncio.Event()

    async def hold() -> None:
        async with admission.slot() as held:
            admission.first_token(held)  # prompts read at once: only the service is unknown
            await gate.wait()

    running = [asyncio.create_task(hold()) for _ in range(2)]
    await asyncio.sleep(0)
    assert admission.predicted_ttft() == 0.0  # running for 0 s: no evidence yet
    clock.now += 4.0  # neither has finished in 4 s: a slot frees every 2 s at best
    assert admission.predicted_ttft() == 2.0
    waiting = asyncio.create_task(hold())
    await asyncio.sleep(0)
    with pytest.raises(Overloaded):  # second in line: 2 x 2 s > 3 s
        async with admission.slot():
            pytest.fail("must not be admitted")
    gate.set()
    await asyncio.gather(*running, waiting)
    assert admission.rate.completed == 3


async def test_free_slots_do_not_help_while_the_engine_reads_prompts_ahead() -> None:
    """Eight requests let into eight free slots got their first tokens 0.9 s apart on the
    2-core box: the prompts ahead count, not only the slots."""
    clock = Clock()
    admission = Admission(slots=8, max_waiting=100, timeout=10, ttft_slo=2.0, clock=clock)
    await complete(admission, clock, service=5.0, first=0.9)  # one prompt read in 0.9 s
    assert admission.rate.prefill.value == pytest.approx(0.9)
    steady(admission)
    gate = asyncio.Event()

    async def unread() -> None:
        async with admission.slot():
            await gate.wait()

    running = [asyncio.create_task(unread())]
    await asyncio.sleep(0)
    assert admission.predicted_ttft() == pytest.approx(2 * 0.9)  # one prompt ahead, then its own
    running.append(asyncio.create_task(unread()))
    await asyncio.sleep(0)
    assert admission.reading == 2
    # Six slots are free, but two prompts are ahead: 3 x 0.9 s > 2 s.
    with pytest.raises(Overloaded) as info:
        async with admission.slot():
            pytest.fail("must not be admitted")
    assert info.value.retry_after == 1.0
    assert admission.running == 2
    gate.set()
    await asyncio.gather(*running)
    # Nothing left to read: an idle engine takes the next request, whatever it measured.
    admission.rate.prefill.add(60.0)
    async with admission.slot():
        assert admission.running == 1


async def test_a_prompt_read_longer_than_the_rate_says_raises_the_estimate() -> None:
    """A stalled engine is not described by its past: the prompt being read is a floor."""
    clock = Clock()
    admission = Admission(slots=4, max_waiting=100, timeout=10, ttft_slo=2.0, clock=clock)
    await complete(admission, clock, service=1.0, first=0.1)
    steady(admission)
    async with admission.slot():
        assert admission.predicted_ttft() == pytest.approx(0.2)
        clock.now += 1.5  # its first token is 1.5 s late
        assert admission.predicted_ttft() == pytest.approx(3.0)
        assert isinstance(admission.refusal(), Overloaded)


async def test_a_prompt_read_after_the_one_before_it_counts_from_that_one() -> None:
    """Prompts are read one after another: the second's sample starts at the first's token."""
    clock = Clock()
    admission = Admission(slots=2, max_waiting=100, timeout=10, ttft_slo=None, clock=clock)
    admission.rate.prefill.weight = 1.0  # the last sample alone
    async with admission.slot() as first, admission.slot() as second:
        clock.now += 0.9
        admission.first_token(first)
        assert admission.rate.prefill.value == pytest.approx(0.9)
        clock.now += 0.8
        admission.first_token(second)
        assert admission.rate.prefill.value == pytest.approx(0.8)  # not 1.7


async def test_no_service_time_yet_the_bounded_line_decides() -> None:
    clock = Clock()
    admission = Admission(slots=1, max_waiting=0, timeout=10, ttft_slo=60.0, clock=clock)
    async with admission.slot() as hold:
        admission.first_token(hold)  # read at once: nothing predicts a long wait
        with pytest.raises(QueueFull):
            async with admission.slot():
                pytest.fail("must not be admitted")
    assert admission.refused == {"overloaded": 0, "queue_full": 1, "queue_timeout": 0}


async def test_a_spread_in_prompt_reading_widens_the_estimate() -> None:
    """By its mean alone a request near the SLO's edge misses it whenever a prompt ahead
    reads slowly: the estimate allows for the spread seen."""
    clock = Clock()
    admission = Admission(slots=8, max_waiting=64, timeout=10, ttft_slo=2.0, clock=clock)
    for first in (0.6, 0.6, 0.6, 0.6, 0.6, 0.6):
        await complete(admission, clock, service=1.0, first=first)
    async with admission.slot():
        assert admission.refusal() is None  # steady 0.6 s: 0.6 ahead + 0.6 fits 2 s
    await complete(admission, clock, service=1.0, first=1.4)
    mean, spread = admission.rate.prefill.value, admission.rate.prefill.deviation
    assert mean is not None
    assert 2 * mean < 2.0  # by the mean it would still fit
    async with admission.slot():
        assert admission.predicted_ttft() == pytest.approx(2 * (mean + 3 * spread))
        assert isinstance(admission.refusal(), Overloaded)


async def test_refuses_at_once_what_cannot_start_within_the_slo() -> None:
    clock = Clock()
    admission = Admission(slots=2, max_waiting=100, timeout=10, ttft_slo=3.0, clock=clock)
    await complete(admission, clock, service=4.0, first=0.5)  # slot frees every 2 s
    steady(admission)
    assert admission.predicted_ttft() == 0.5  # a slot is free

    entered: list[int] = []

    async def request(i: int, gate: asyncio.Event) -> None:
        async with admission.slot():
            entered.append(i)
            await gate.wait()

    gate = asyncio.Event()
    running = [asyncio.create_task(request(i, gate)) for i in range(2)]
    await asyncio.sleep(0)
    assert admission.running == 2
    # Next in line: 1 x 2 s + 0.5 s = 2.5 s, within 3 s: it waits.
    assert admission.predicted_ttft() == 2.5
    waiting = asyncio.create_task(request(2, gate))
    await asyncio.sleep(0)
    assert admission.waiting == 1
    # The one after: 2 x 2 s + 0.5 = 4.5 s > 3 s: refused without waiting.
    with pytest.raises(Overloaded) as info:
        async with admission.slot():
            pytest.fail("must not be admitted")
    assert info.value.code == "overloaded"
    assert info.value.retry_after == pytest.approx(1.5)  # the excess over the SLO
    assert "4.5 s" in info.value.message
    assert admission.waiting == 1
    assert admission.refused["overloaded"] == 1

    gate.set()
    await asyncio.gather(*running, waiting)
    assert sorted(entered) == [0, 1, 2]
    assert admission.running == 0


async def test_retry_after_is_at_least_a_second() -> None:
    clock = Clock()
    admission = Admission(slots=1, max_waiting=100, timeout=10, ttft_slo=0.1, clock=clock)
    await complete(admission, clock, service=0.15, first=0.05)
    async with admission.slot():
        with pytest.raises(Overloaded) as info:  # 0.15 + 0.05 s > 0.1 s
            async with admission.slot():
                pytest.fail("must not be admitted")
    assert info.value.retry_after == 1.0


async def test_the_rate_follows_the_engine() -> None:
    clock = Clock()
    admission = Admission(slots=1, max_waiting=100, timeout=10, ttft_slo=2.0, clock=clock)
    await complete(admission, clock, service=10.0, first=1.0)
    async with admission.slot():
        with pytest.raises(Overloaded):
            async with admission.slot():
                pytest.fail("must not be admitted")
    for _ in range(30):  # the engine got fast: the averages forget the slow request
        await complete(admission, clock, service=0.2, first=0.1)
    prediction = admission.predicted_ttft()
    assert prediction is not None
    assert prediction < 0.5


async def test_requests_cut_short_do_not_count() -> None:
    clock = Clock()
    admission = Admission(slots=1, max_waiting=4, timeout=10, ttft_slo=2.0, clock=clock)
    with contextlib.suppress(KeyError):
        async with admission.slot():
            clock.now += 0.01
            raise KeyError("client left")
    assert admission.rate.completed == 0
    assert admission.predicted_ttft() is None
    assert admission.running == 0


async def test_policy_queue_never_predicts() -> None:
    clock = Clock()
    admission = Admission(slots=1, max_waiting=1, timeout=10, ttft_slo=None, clock=clock)
    await complete(admission, clock, service=100.0, first=50.0)
    gate = asyncio.Event()

    async def hold() -> None:
        async with admission.slot():
            await gate.wait()

    first = asyncio.create_task(hold())
    await asyncio.sleep(0)
    second = asyncio.create_task(hold())  # waits, however long the prediction
    await asyncio.sleep(0)
    assert admission.waiting == 1
    with pytest.raises(QueueFull) as info:
        async with admission.slot():
            pytest.fail("must not be admitted")
    assert info.value.retry_after == 100.0  # one slot's turn at the measured rate
    gate.set()
    await asyncio.gather(first, second)


async def test_with_an_slo_nobody_waits_longer_than_it() -> None:
    """A wrong prediction costs the customer the SLO, not --queue-timeout."""
    admission = Admission(slots=1, max_waiting=4, timeout=30.0, ttft_slo=0.05)
    assert admission.wait_limit == 0.05
    async with admission.slot() as hold:
        admission.first_token(hold)  # read at once: the line looks short
        with pytest.raises(QueueTimeout) as info:
            async with admission.slot():
                pytest.fail("must not be admitted")
    assert "0.05 s" in info.value.message
    assert admission.refused["queue_timeout"] == 1
    assert Admission(slots=1, max_waiting=4, timeout=30.0).wait_limit == 30.0


async def test_the_first_token_is_measured_when_it_comes_not_at_the_end() -> None:
    """A reply of minutes must not keep the first-token estimate minutes old."""
    clock = Clock()
    admission = Admission(slots=2, max_waiting=4, timeout=10, ttft_slo=2.0, clock=clock)
    async with admission.slot() as hold:
        clock.now += 0.7
        admission.first_token(hold)
        assert admission.rate.prefill.value == pytest.approx(0.7)
        clock.now += 5.0
        admission.first_token(hold)  # later tokens are not first tokens
        assert admission.rate.prefill.value == pytest.approx(0.7)
        assert admission.rate.completed == 0
    assert admission.rate.completed == 1


async def test_check_refuses_now_what_slot_would_and_takes_nothing() -> None:
    clock = Clock()
    admission = Admission(slots=1, max_waiting=4, timeout=10, ttft_slo=2.0, clock=clock)
    assert admission.refusal() is None
    ticket = admission.check()  # a free slot: nothing to refuse, and no slot taken
    assert admission.running == 0
    admission.release(ticket)
    await complete(admission, clock, service=10.0, first=1.0)
    async with admission.slot():
        refusal = admission.refusal()
        assert isinstance(refusal, Overloaded)
        assert admission.refused["overloaded"] == 0  # asking counts nothing
        with pytest.raises(Overloaded):
            admission.check()
        assert admission.refused["overloaded"] == 1
        assert admission.running == 1
        assert admission.waiting == 0


async def test_a_ticket_counts_as_a_prompt_ahead_until_its_slot_takes_it() -> None:
    """A burst all passed the door before the first took its slot, built its prompts, and
    was refused at the slots: a request let through counts at once."""
    clock = Clock()
    admission = Admission(slots=8, max_waiting=64, timeout=10, ttft_slo=2.0, clock=clock)
    await complete(admission, clock, service=5.0, first=0.9)
    steady(admission)
    first = admission.check()  # an idle engine: let through
    second = admission.check()  # one prompt ahead: 0.9 + 0.9 s fits 2 s
    assert admission.reading == 2
    with pytest.raises(Overloaded):  # two ahead: 2.7 s
        admission.check()
    async with admission.slot(first):  # judged at the door, not anew (anew: refused)
        assert admission.running == 1
        assert admission.reading == 2  # its prompt unread, and the second's ticket
        admission.release(second)  # the second's client left before its slot
        assert admission.reading == 1
    assert admission.refused["overloaded"] == 1


async def test_the_door_gives_back_a_ticket_whose_request_ends_before_its_slot() -> None:
    admission = Admission(slots=1, max_waiting=0, timeout=10, ttft_slo=2.0)
    with contextlib.suppress(KeyError), admission.door():
        assert admission.reading == 1
        raise KeyError("the prompt could not be built")
    assert admission.reading == 0
    with admission.door() as ticket:
        async with admission.slot(ticket):
            assert admission.reading == 1  # the hold's prompt, the ticket gone
        admission.release(ticket)  # taken already: nothing to give back
    assert admission.reading == 0


def measured_line(admission: Admission) -> None:
    """An engine that reads a cached prompt in 0.2 s and 300 more tokens in 1.5 s more, its
    prompts on the line (no spread): 0.195 s + 5 ms a token."""
    admission.rate.reading.add(1, 0.2)
    admission.rate.reading.add(301, 1.7)
    admission.rate.reading.deviation = 0.0


async def test_a_long_prompt_is_refused_at_its_slot_where_a_short_one_is_taken() -> None:
    """The door judged a typical prompt; at its slot a built prompt is judged by the tokens
    it leaves to read, and by the time its request has already spent."""
    clock = Clock()
    admission = Admission(slots=8, max_waiting=100, timeout=10, ttft_slo=2.0, clock=clock)
    measured_line(admission)
    async with admission.slot() as decoding:  # another reply is being written
        admission.first_token(decoding)
        received = clock.now - 0.1
        with pytest.raises(Overloaded) as info:  # 0.1 + 0.195 + 400 x 5 ms = 2.3 s
            async with admission.slot(tokens=400, received=received):
                pytest.fail("must not be admitted")
        assert "400-token prompt" in str(info.value)
        assert admission.refused["overloaded"] == 1
        async with admission.slot(tokens=50, received=received) as short:  # 0.5 s
            assert short.tokens == 50
        # The same short prompt, after 1.5 s spent on its way (a slow second look):
        with pytest.raises(Overloaded):
            async with admission.slot(tokens=50, received=clock.now - 1.6):
                pytest.fail("must not be admitted")


async def test_the_prompts_ahead_count_by_their_length() -> None:
    clock = Clock()
    admission = Admission(slots=8, max_waiting=100, timeout=10, ttft_slo=2.0, clock=clock)
    measured_line(admission)
    async with admission.slot(tokens=300) as ahead:  # an idle engine takes it: 1.695 s
        with pytest.raises(Overloaded):  # 1.695 + 0.695 s
            async with admission.slot(admission.check(), tokens=100, received=clock.now):
                pytest.fail("must not be admitted")
        async with admission.slot(admission.check(), tokens=1, received=clock.now):
            pass  # 1.695 + 0.2 s
        clock.now += 1.5
        admission.first_token(ahead)
        assert admission.rate.reading.samples == 3  # read in 1.5 s: a sample of the line
        assert admission.rate.reading.seconds(300) < 1.695


async def test_an_engine_that_holds_nothing_takes_a_long_prompt() -> None:
    clock = Clock()
    admission = Admission(slots=8, max_waiting=100, timeout=10, ttft_slo=2.0, clock=clock)
    measured_line(admission)
    async with admission.slot(tokens=2000, received=clock.now) as hold:  # 10 s by the line
        assert hold.tokens == 2000


async def test_without_an_slo_or_a_line_the_tokens_decide_nothing() -> None:
    clock = Clock()
    queue = Admission(slots=2, max_waiting=100, timeout=10, clock=clock)
    measured_line(queue)
    fresh = Admission(slots=2, max_waiting=100, timeout=10, ttft_slo=2.0, clock=clock)
    for admission in (queue, fresh):
        async with admission.slot(), admission.slot(tokens=5000, received=clock.now - 5):
            assert admission.running == 2


async def test_a_slot_is_awaited_only_if_the_slowest_likely_reply_frees_it_in_time() -> None:
    """Replies run from a few tokens to --max-tokens: a slot judged free by the mean hold
    came 1.2 s late for the prompt let in on it (10 users, the 2-core box)."""
    clock = Clock()
    admission = Admission(slots=2, max_waiting=100, timeout=10, ttft_slo=3.0, clock=clock)
    await complete(admission, clock, service=2.0, first=0.5)
    await complete(admission, clock, service=6.0, first=0.5)
    admission.rate.prefill.deviation = 0.0
    service = admission.rate.service
    assert service.value == pytest.approx(2.8)
    assert service.upper == pytest.approx(7.6)
    async with admission.slot(), admission.slot():
        # By the mean a slot frees in 1.4 s (1.9 s with the prompt); by the spread, in 3.8 s.
        assert admission.predicted_ttft() == pytest.approx(7.6 / 2 + 0.5)
        with pytest.raises(Overloaded):
            async with admission.slot():
                pytest.fail("must not wait for a slot")
