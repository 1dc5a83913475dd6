"""Admission control: at most ``slots`` requests in the engine, a bounded line, and (policy
``predicted``) no request admitted that its calibrated prediction says will get its first
token after ``ttft_slo``.

Every request that reaches the engine is judged, whatever the policy: a point estimate of
its first-token time from the rates measured here (``rates.py``), corrected by how the
recent estimates compared with what then happened (``outcomes.py``). The estimate is
what waits before the request's own prompt (``ahead.py``: the slot wait, the prompts read
before its own, the time it already spent) plus its own prompt's reading, at the measured
speed, both slowed in proportion where the prompt being read takes longer than the line
says. A ticket held while the fast path decides counts as the share of such tickets that
recently went on to a slot (most of a shop's messages never reach the engine: counted
whole, a burst of first messages refused the few that did). ``readable`` turns it around:
the longest prompt whose first token is predicted within the SLO now (/chat fits its
prompt to it under load, ``service/prompt_fit.py``).

The prediction is that estimate times a ``quantile`` of recent realized ÷ estimated (the
correction), so it is a calibrated quantile of the first-token time, and the outcomes keep
it honest: an engine that reads several prompts in one step shows as ratios under 1.

A request is refused (``Overloaded``, with a ``Retry-After`` of the excess) only on
evidence: a queue in front of it (no free slot, or prompts ahead still to read), a
prediction over the SLO, and either the recent outcomes of requests estimated alike mostly
missed it (``miss_curve.py``) or, beyond what they reach (on a fresh server, everywhere),
the prediction lies past twice the SLO (``Outcomes.refusal``). Before its first
``MIN_OUTCOMES`` outcomes of any estimate, one request at a time predicted between the SLO
and twice it is let in as a probe, and the others are refused while it is in flight: a
fresh server admits and measures, but a burst it cannot yet judge does not all read its
long first turns at once (admitted together, seven of a fresh server's eight such /chat
first turns missed). After them, short outcomes say the engine keeps up, and the far rule
alone stands until the near ones calibrate: /v1 streams of short prompts calibrate late. An
engine with a free slot and nothing to read takes any request.
``shadow`` records what would have been refused and refuses nothing on prediction. The
bounded line (``max_waiting``) is always a hard cap; policy ``queue`` is the line alone.

The door (``check``) comes before the prompt is built, so it judges a typical prompt; its
slot judges it again by the prompt's tokens left to read and the time spent so far.

A full line fails at once with QueueFull; a request that waits longer than ``timeout``
(policy ``predicted``: past the moment its first token could still come within the SLO,
given how late first tokens came after slots granted alone) fails with QueueTimeout,
and one past that moment already, with no slot free, is refused at once (Overloaded).
Refusals, not admitted requests' outcomes, yet censored misses the curve learns from
(shadow finds the deadline right about nine times in ten). Under the other policies a
wait past that moment is recorded under rule ``late``, so shadow measures the deadline
too. Slots are handed over first come, first served (``line.py``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Literal

from kefu.errors import Overloaded, QueueFull, QueueTimeout, Unavailable
from kefu.limits.ahead import Ahead, ahead_of, reading_since
from kefu.limits.holds import Hold, Judgement, Refusal, Ticket, Tickets
from kefu.limits.line import Gone, Line
from kefu.limits.outcomes import MIN_OUTCOMES, NEAR_SHARE, Outcome, Outcomes, Rule, why
from kefu.limits.rates import ServiceRate

log = logging.getLogger("kefu.admission")

AdmissionPolicy = Literal["predicted", "queue"]

# Seconds to the first token that ``predicted`` aims for (--ttft-slo): "acceptable" by the
# field's thresholds (``observe/diagnose.py``).
DEFAULT_TTFT_SLO = 2.0
# How far off a prediction may be before outcomes near the SLO have corrected it: the
# warm-up reads its prompt on an idle box, and in a burst's first seconds this box read
# prompts 1.5-2.2 times slower (``readable`` fits prompts to the SLO divided by it).
UNCALIBRATED = 2.0
# The quantile of the first-token time a prediction stands for.
DEFAULT_QUANTILE = 0.9
# The quantile of how late first tokens came after their slots (beyond the reading line)
# that the line's deadline allows for: a request waits while a first token that late would
# still make the SLO, so it leaves once a slot then would more likely than not start its
# reply past it. At 0.95 the deadline kept every accepted reply within the SLO and turned
# away one request in three that would have made it; at 0.1 it turned away none, and let
# in misses (streams at 10x: 15 %) (``benchmarks/admission.py``, rule ``late``).
LATENESS_QUANTILE = 0.5
# Refusals kept for /stats and kefu diagnose, with when they came and whether a slot was
# free: enough for a 15-minute window at a few hundred refusals a second.
REFUSALS_KEPT = 100_000


class Admission:
    def __init__(
        self,
        *,
        slots: int,
        max_waiting: int,
        timeout: float,
        ttft_slo: float = DEFAULT_TTFT_SLO,
        policy: AdmissionPolicy = "queue",
        shadow: bool = False,
        quantile: float = DEFAULT_QUANTILE,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``policy`` "queue" (the default here) records its predictions and acts on none;
        the server's default is --admission predicted. ``clock`` must be the one
        first-token times are read on (the timeline's perf_counter)."""
        self.slots = slots
        self.max_waiting = max_waiting
        self.timeout = timeout
        self.ttft_slo = ttft_slo
        self.policy = policy
        self.shadow = shadow
        self.clock = clock
        self.rate = ServiceRate()
        self.outcomes = Outcomes(quantile, near=ttft_slo * NEAR_SHARE)
        self.refused = {"overloaded": 0, "queue_full": 0, "queue_timeout": 0}
        self.refused_with_free_slot = dict.fromkeys(self.refused, 0)
        self.refusals: deque[Refusal] = deque(maxlen=REFUSALS_KEPT)
        self._free = slots
        self._line = Line(clock)
        self._holds: set[Hold] = set()
        self.tickets = Tickets()
        self._last_first_token: float | None = None

    @property
    def refuses_on_prediction(self) -> bool:
        return self.policy == "predicted" and not self.shadow

    @property
    def wait_limit(self) -> float:
        """How long a request may wait in line: --queue-timeout, and under ``predicted`` no
        longer than the SLO (one still waiting then has missed it whatever comes next, and
        a prediction that was wrong must not cost the customer 30 s)."""
        return self.timeout if self.policy == "queue" else min(self.timeout, self.ttft_slo)

    @property
    def running(self) -> int:
        return self.slots - self._free

    @property
    def waiting(self) -> int:
        return self._line.waiting

    @property
    def reading(self) -> int:
        """Requests let in whose first token has not come: prompts the engine still reads,
        or will once their tickets take their slots."""
        return sum(1 for h in self._holds if h.first_token is None) + len(self.tickets)

    @property
    def _slot_free(self) -> bool:
        return self._free > 0 and not self._line

    def judge(
        self,
        tokens: int | None = None,
        received: float | None = None,
        ticket: Ticket | None = None,
    ) -> Judgement:
        """A request that came at ``received`` (now if None), whose prompt leaves ``tokens``
        to read (a typical prompt if None), let through the door with ``ticket`` (None: it
        comes after every ticket given): its first token, predicted."""
        ahead = self._ahead(received, ticket)
        own = self._own_reading(tokens)
        estimate = ahead.seconds + own * ahead.slowdown
        predicted = estimate * self.outcomes.correction()
        measured = self.rate.reading.samples > 0
        rule: Rule | None = None
        missed_alike = None
        if measured and ahead.queued:
            rule, missed_alike = self.outcomes.refusal(estimate, predicted, self.ttft_slo)
        probe = (
            measured
            and ahead.queued
            and rule is None
            and predicted > self.ttft_slo
            and self.outcomes.recorded < MIN_OUTCOMES
        )
        if probe and self._probing():
            rule, probe = "probe", False
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "judged a %s-token prompt: %s, %.3f s own, x%.2f slower: %.3f s estimated, "
                "%.3f s predicted%s",
                "typical" if tokens is None else tokens,
                ahead,
                own,
                ahead.slowdown,
                estimate,
                predicted,
                f" (refuse: {why(rule, missed_alike)})" if rule else " (probe)" if probe else "",
            )
        return Judgement(estimate, predicted, ahead.queued, rule, measured, probe)

    def readable(self, received: float | None = None, ticket: Ticket | None = None) -> int | None:
        """The most prompt tokens left to read with which a request that came at
        ``received``, let through with ``ticket``, is predicted to get its first token
        within the SLO now. None where no length would change that: nothing measured yet,
        a reading that does not grow with length, or a wait past the SLO before its own
        prompt is even begun.

        Before outcomes near the SLO have calibrated the prediction, within half of it
        (``UNCALIBRATED``): a prompt shortened costs a passage or an old turn, where an
        uncalibrated prediction of 1-2 s came true past a 2 s SLO 15 times in 21 (/chat
        under 16 simulated customers, four fresh servers)."""
        reading = self.rate.reading
        if not reading.samples:
            return None
        fixed, per_token = reading.line()
        ahead = self._ahead(received, ticket)
        outcomes = self.outcomes
        correction = outcomes.correction() if outcomes.ready else UNCALIBRATED
        left = self.ttft_slo / correction - ahead.seconds
        own = left / ahead.slowdown - fixed
        if own <= 0 or per_token <= 0:
            return None
        return int(own / per_token)

    def _ahead(self, received: float | None, ticket: Ticket | None) -> Ahead:
        now = self.clock()
        return ahead_of(
            self.rate,
            now=now,
            spent=0.0 if received is None else max(0.0, now - received),
            holds=self._holds,
            gives_up=self._line.gives_up(),
            tickets=self.tickets.before(ticket),
            slot_free=self._slot_free,
            last_first_token=self._last_first_token,
        )

    def _probing(self) -> bool:
        """A probe is in flight: let in, its first token not come yet."""
        judgements = [h.judgement for h in self._holds if h.first_token is None]
        judgements += [t.judgement for t in self.tickets]
        judgements += self._line.judgements()
        return any(j is not None and j.probe for j in judgements)

    def predicted_ttft(self) -> float:
        """A typical request arriving now: seconds to its first token, calibrated."""
        return self.judge().predicted

    def token(self, hold: Hold) -> None:
        """The held request sent a token now: its first (``first_token``), or one more
        whose gap from the last measures how fast replies run."""
        if hold.first_token is None:
            self.first_token(hold)
        now = self.clock()
        if hold.last_token is not None:
            self.rate.token_gap.add(now - hold.last_token)
        hold.last_token = now
        hold.emitted += 1

    def first_token(self, hold: Hold) -> None:
        """The held request's first token came now (once per hold): one prompt read, since
        the request was let in or since the previous prompt was read, whichever is later;
        and its prediction's outcome."""
        if hold.first_token is not None:
            return
        hold.first_token = now = self.clock()
        if hold.tokens is not None:
            self.rate.reading.add(
                hold.tokens, now - reading_since(hold.granted, self._last_first_token)
            )
        self.rate.lateness.add(now - hold.granted - hold.reading, alone=hold.alone)
        self._last_first_token = now
        self._record(hold.judgement, now - hold.received)

    def _record(
        self,
        judgement: Judgement | None,
        realized: float,
        *,
        censored: bool = False,
        refused: bool = False,
    ) -> None:
        if judgement is None or not judgement.measured:
            return
        outcome = Outcome(
            estimate=judgement.estimate,
            predicted=judgement.predicted,
            realized=realized,
            queued=judgement.queued,
            rule=judgement.refusal,
            missed=censored or realized > self.ttft_slo,
            censored=censored,
            refused=refused,
        )
        log.debug("outcome: %s", outcome)
        self.outcomes.add(outcome)

    def _overloaded(self, judgement: Judgement, tokens: int | None) -> Overloaded | None:
        """The refusal a judgement calls for, None where it admits (or only records)."""
        if not judgement.refuse or not self.refuses_on_prediction:
            return None
        what = "a reply" if tokens is None else f"a reply to this {tokens}-token prompt"
        return Overloaded(
            f"the server is busy: {what} would start in about {judgement.predicted:.1f} s, "
            f"over the {self.ttft_slo:g} s it aims for; retry shortly",
            retry_after=max(1.0, judgement.predicted - self.ttft_slo),
        )

    def _line_full(self) -> QueueFull | None:
        if self._slot_free or self.waiting < self.max_waiting:
            return None
        return QueueFull(
            f"the server is at capacity ({self.slots} running, {self.waiting} waiting); "
            "retry shortly",
            retry_after=self._retry_after(),
        )

    def refusal(self) -> Unavailable | None:
        """What a request arriving now would be refused with at once (Overloaded,
        QueueFull), or None when it would get a slot or a place in line; counts nothing."""
        refusal, _ = self._at_door()
        return refusal

    def _at_door(self) -> tuple[Unavailable | None, Judgement]:
        judgement = self.judge()
        return self._overloaded(judgement, None) or self._line_full(), judgement

    def check(self) -> Ticket:
        """Raise now what ``slot`` would refuse at once, else a ticket for ``slot``: a caller
        asks before it spends CPU on what only an admitted request needs (a prompt), so a
        refusal costs about a millisecond however loaded the server is. The ticket counts
        as a prompt ahead until ``slot`` takes it or ``release`` drops it."""
        refusal, judgement = self._at_door()
        self._refuse(refusal)
        return self.tickets.give(judgement)

    def ticket_if_free(self) -> Ticket | None:
        """``check`` that neither raises nor counts a refusal: a tentative ticket (its
        request may yet be answered without the engine), or None where ``check`` would
        refuse now."""
        refusal, judgement = self._at_door()
        return None if refusal is not None else self.tickets.give(judgement, tentative=True)

    @contextmanager
    def door(self) -> Iterator[Ticket]:
        """``check``, and ``release`` when the block ends (nothing if its slot took it)."""
        ticket = self.check()
        try:
            yield ticket
        finally:
            self.release(ticket)

    def release(self, ticket: Ticket) -> None:
        """The ticket's request ended before its slot (its client left, its prompt failed);
        nothing once ``slot`` has taken it."""
        self.tickets.end(ticket, taken=False)

    def _refuse(self, refusal: Unavailable | None) -> None:
        """Count and raise ``refusal``, if there is one."""
        if refusal is not None:
            self._count(refusal.code)
            raise refusal

    def _count(self, code: str) -> None:
        slot_free = self._free > 0
        self.refused[code] += 1
        self.refused_with_free_slot[code] += slot_free
        reading = self.reading > 0 or self.waiting > 0
        self.refusals.append(Refusal(time.time(), code, slot_free, reading))

    @asynccontextmanager
    async def slot(
        self,
        ticket: Ticket | None = None,
        *,
        tokens: int | None = None,
        received: float | None = None,
    ) -> AsyncIterator[Hold]:
        """A slot, judged at the door by ``ticket`` (from ``check``) or now without one,
        and again by the prompt's ``tokens`` left to read when they are counted (TTFT
        from ``received``, now if None)."""
        received = self.clock() if received is None else received
        judgement = await self._acquire(ticket, tokens, received)
        hold = Hold(
            received=received,
            granted=self.clock(),
            tokens=tokens,
            judgement=judgement,
            reading=self._own_reading(tokens),
            alone=all(h.first_token is not None for h in self._holds),
        )
        self._holds.add(hold)
        completed = False
        try:
            yield hold
            completed = True
        finally:
            self._holds.discard(hold)
            self._release()
            # Only a request that ran to its end measures the rate: one cut short by a
            # client that left says nothing of how long the next will hold its slot.
            if completed:
                self.rate.record(self.clock() - hold.granted, hold.emitted)

    async def _acquire(
        self, ticket: Ticket | None, tokens: int | None, received: float
    ) -> Judgement | None:
        """Wait for a slot; the judgement its prediction is recorded by."""
        judgement = None
        if ticket is not None and ticket in self.tickets:
            self.tickets.end(ticket, taken=True)  # judged at the door: not anew
            judgement = ticket.judgement
        else:
            refusal, judgement = self._at_door()
            self._refuse(refusal)
        if tokens is not None:
            self.rate.reading.observe(tokens)
            judgement = self.judge(tokens, received, ticket)
            self._refuse(self._overloaded(judgement, tokens))
        if self._slot_free:
            self._free -= 1
            return judgement
        entered = self.clock()
        deadline = self._deadline(tokens, received)
        limit = deadline if self.refuses_on_prediction else self.wait_limit
        # Turned away at the deadline: a miss the door learns to refuse at once.
        refused = self.refuses_on_prediction and limit < self.wait_limit
        if limit <= 0:
            self._record(judgement, entered - received, censored=True, refused=True)
            self._refuse(self._too_late(tokens))
        try:
            await self._line.wait(limit, judgement, self._release)
        except Gone:
            self._count("queue_timeout")
            gave_up = judgement if self.refuses_on_prediction else _late(judgement)
            self._record(gave_up, self.clock() - received, censored=True, refused=refused)
            raise QueueTimeout(
                f"no capacity freed up within {limit:.3g} s; retry shortly",
                retry_after=self._retry_after(),
            ) from None
        # Where the deadline only records, a slot that came after it is one ``predicted``
        # would have refused: its outcome measures the deadline's precision.
        past = not self.refuses_on_prediction and self.clock() - entered > deadline
        return _late(judgement) if past else judgement

    def _deadline(self, tokens: int | None, received: float) -> float:
        """Seconds a request may wait in line from now under ``predicted``: ``wait_limit``,
        and no later than a slot would more likely than not start its reply past the SLO
        (the SLO from its arrival, less its own prompt's reading and the median of how late
        recent first tokens came after slots granted alone). Other policies wait
        ``wait_limit`` and record which waits ran past this (rule ``late``)."""
        own = self._own_reading(tokens)
        own += self.rate.lateness.margin(LATENESS_QUANTILE)
        return min(self.wait_limit, received + self.ttft_slo - own - self.clock())

    def _too_late(self, tokens: int | None) -> Overloaded:
        what = "a reply" if tokens is None else f"a reply to this {tokens}-token prompt"
        return Overloaded(
            f"the server is busy: no slot is free, and even one now would start {what} "
            f"after the {self.ttft_slo:g} s it aims for; retry shortly",
            retry_after=self._retry_after(),
        )

    def _own_reading(self, tokens: int | None) -> float:
        reading = self.rate.reading
        return reading.seconds(reading.typical if tokens is None else tokens)

    def _retry_after(self) -> float:
        """Until a place in line is likely to free up (one slot's turn), at least 1 s."""
        service = self.rate.service.value
        return 1.0 if service is None else max(1.0, service / self.slots)

    def _release(self) -> None:
        if not self._line.hand_over():  # the slot passes straight to the next in line
            self._free += 1

    def report(self, since: float | None = None) -> dict[str, object]:
        """The predictions against their outcomes, and the refusals (since ``since``, wall
        clock, or since start), with how many came while a slot was free."""
        refusals = [r for r in self.refusals if since is None or r.at >= since]
        by_code: dict[str, int] = {}
        for refusal in refusals:
            by_code[refusal.code] = by_code.get(refusal.code, 0) + 1
        return {
            "policy": self.policy,
            "shadow": self.shadow,
            "ttft_slo_s": self.ttft_slo,
            "predictions": self.outcomes.report(),
            # How much later than the reading line said first tokens came (slots granted alone).
            "first_token_late_p95_s": round(self.rate.lateness.margin(0.95), 3),
            "refusals": {
                "total": len(refusals),
                "by_code": by_code,
                "with_free_slot": sum(r.slot_free for r in refusals),
                # A free slot and no prompt ahead to read: the engine had room.
                "with_room": sum(r.slot_free and not r.reading for r in refusals),
            },
        }


def _late(judgement: Judgement | None) -> Judgement | None:
    """``judgement`` with rule ``late`` (waited past its deadline), where no rule refused
    it already."""
    if judgement is None or judgement.refusal is not None:
        return judgement
    return replace(judgement, refusal="late")
