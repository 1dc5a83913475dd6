"""Admission control: at most ``slots`` requests in the engine, a bounded line, and (policy
``predicted``) no request admitted that the measured service rate says cannot get its
first token within ``ttft_slo``.

A request that would wait past its deadline only fails later, holding a place in line
meanwhile (issue 23: 120 requests each waited 30 s to be told to retry). So the wait is
judged by time, from two rates measured here (the same rule serves the embedded, remote
and fake engines):

- a slot frees every ``service / slots`` seconds (``service``: the EWMA of how long a
  completed request held its slot), and the newcomer gets one after ``waiting + 1`` of them;
- the engine reads prompts about one after another (llama.cpp's chunked prefill: a step's
  budget goes to the oldest prompt first), so the newcomer's first token comes after the
  prompts ahead of it and its own, ``prefill`` each (the EWMA of the time from a request's
  grant, or from the previous first token if that came later, to its first token). A free
  slot is no promise of a fast start: eight requests admitted into eight free slots on the
  2-core box got their first tokens 0.9 s apart, the last 7 s after it was let in. On an
  engine that reads prompts side by side (vLLM) the later first tokens come close behind
  the earlier ones, and ``prefill`` falls to match.

Predicted: ``max(slot wait, prompts ahead x prefill) + prefill``, with ``prefill`` and
``service`` at their upper bounds (``Ewma.upper``, ``limits/rates.py``): judged by its mean
alone, a request admitted near the SLO's edge missed it whenever a prompt ahead read
slowly, or the slot it waited for was held by a long reply. Over the SLO,
the request is refused at once (``Overloaded``) with a ``Retry-After`` of the excess: by
then the line ahead has drained that much. A prompt still being read stands in for the
rates while it takes longer than they say (a stalled engine is not described by its
past), and before a first completion the age of the oldest running request stands in for
the service time (a burst at start would otherwise wait out --queue-timeout: the soak saw
it). An engine with a free slot and no prompt to read always takes the request: a rate
measured while it was busy must not lock an idle engine out. The bounded line
(``max_waiting``) is always a hard cap. Policy ``queue`` is the bounded line alone.

The door (``check``) comes before the prompt is built, so it judges a typical prompt. Once
the prompt is built, its slot judges it again by its length (``prompt_refusal``): a
conversation's later turn leaves hundreds of tokens to read where a repeated question
leaves one, and the time its request has spent on the way counts too.

A full line fails at once with QueueFull; a request that waits longer than ``timeout``
(with an SLO: no longer than the SLO) fails with QueueTimeout. Slots are handed over
first-come, first-served.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Literal

from kefu.errors import Overloaded, QueueFull, QueueTimeout, Unavailable
from kefu.limits.rates import ServiceRate

log = logging.getLogger("kefu.admission")

AdmissionPolicy = Literal["predicted", "queue"]


@dataclass(eq=False)  # by identity: the running ones are kept in a set
class Hold:
    """One request's slot: when it was granted, and (``Admission.first_token``) when its
    first token came, on the admission's clock."""

    granted: float
    first_token: float | None = None
    tokens: int | None = None  # of its prompt, left to read; None where not counted


@dataclass(eq=False)
class Ticket:
    """A request let through the door (``Admission.check``) that has not taken its slot
    yet: it builds its prompt meanwhile, and the requests after it count that prompt as
    ahead of theirs. A cold start's burst all passed the door before the first took its
    slot, built 61 prompts on the 2-core box, and was refused at the slots ~80 ms later."""


class Admission:
    def __init__(
        self,
        *,
        slots: int,
        max_waiting: int,
        timeout: float,
        ttft_slo: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``ttft_slo`` None: the bounded line alone (policy ``queue``). ``clock`` must be
        the one first-token times are read on (the timeline's perf_counter)."""
        self.slots = slots
        self.max_waiting = max_waiting
        self.timeout = timeout
        self.ttft_slo = ttft_slo
        self.clock = clock
        self.rate = ServiceRate()
        self.refused = {"overloaded": 0, "queue_full": 0, "queue_timeout": 0}
        self._free = slots
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._holds: set[Hold] = set()
        self._tickets: set[Ticket] = set()
        self._last_first_token: float | None = None

    @property
    def wait_limit(self) -> float:
        """How long a request may wait in line: --queue-timeout, and with a TTFT SLO no
        longer than the SLO (one still waiting then has missed it whatever comes next,
        and a prediction that was wrong must not cost the customer 30 s)."""
        return self.timeout if self.ttft_slo is None else min(self.timeout, self.ttft_slo)

    @property
    def running(self) -> int:
        return self.slots - self._free

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    @property
    def reading(self) -> int:
        """Requests let in whose first token has not come: prompts the engine still reads,
        or will once their tickets take their slots."""
        return sum(1 for h in self._holds if h.first_token is None) + len(self._tickets)

    @property
    def _slot_free(self) -> bool:
        return self._free > 0 and not self._waiters

    def _oldest_running(self, now: float) -> float | None:
        """The age of the oldest request holding a slot, None when none does."""
        oldest = min((h.granted for h in self._holds), default=None)
        return None if oldest is None else now - oldest

    def predicted_ttft(self) -> float | None:
        """A request arriving now: seconds to its first token, by the measured rates."""
        now = self.clock()
        unread = [h.granted for h in self._holds if h.first_token is None]
        read_so_far = now - self._reading_since(min(unread)) if unread else None
        return self.rate.predicted_ttft(
            ahead=self.waiting,
            slots=self.slots,
            slot_free=self._slot_free,
            reading=len(unread) + len(self._tickets),
            oldest_running=self._oldest_running(now),
            read_so_far=read_so_far,
        )

    def first_token(self, hold: Hold) -> None:
        """The held request's first token came now (once per hold): one prompt read, since
        the request was let in or since the previous prompt was read, whichever is later."""
        if hold.first_token is None:
            hold.first_token = now = self.clock()
            seconds = now - self._reading_since(hold.granted)
            self.rate.prefill.add(seconds)
            if hold.tokens is not None:
                if log.isEnabledFor(logging.DEBUG):
                    said = self.rate.reading.seconds(hold.tokens)
                    log.debug(
                        "read a prompt of %d tokens in %.3f s; the line said %.3f s",
                        hold.tokens,
                        seconds,
                        said,
                    )
                self.rate.reading.add(hold.tokens, seconds)
            self._last_first_token = now

    def _reading_since(self, granted: float) -> float:
        """When the engine began reading the prompt of a request let in at ``granted``: then,
        or when the prompt before it was read, whichever came later."""
        if self._last_first_token is None:
            return granted
        return max(granted, self._last_first_token)

    def refusal(self) -> Unavailable | None:
        """What a request arriving now would be refused with at once (Overloaded,
        QueueFull), or None when it would get a slot or a place in line; counts nothing."""
        slot_free = self._slot_free
        if slot_free and not self.reading:
            return None  # an idle engine takes it, whatever it measured while busy
        if self.ttft_slo is not None:
            predicted = self.predicted_ttft()
            if predicted is not None and predicted > self.ttft_slo:
                return Overloaded(
                    f"the server is busy: a reply would start in about {predicted:.1f} s, "
                    f"over the {self.ttft_slo:g} s it aims for; retry shortly",
                    retry_after=max(1.0, predicted - self.ttft_slo),
                )
        if not slot_free and self.waiting >= self.max_waiting:
            return QueueFull(
                f"the server is at capacity ({self.slots} running, {self.waiting} waiting); "
                "retry shortly",
                retry_after=self._retry_after(),
            )
        return None

    def check(self) -> Ticket:
        """Raise now what ``slot`` would refuse at once, else a ticket for ``slot``: a caller
        asks before it spends CPU on what only an admitted request needs (a prompt), so a
        refusal costs about a millisecond however loaded the server is. The ticket counts
        as a prompt ahead until ``slot`` takes it or ``release`` drops it."""
        self._refuse(self.refusal())
        return self._ticket()

    def ticket_if_free(self) -> Ticket | None:
        """``check`` that neither raises nor counts a refusal: a ticket, or None where
        ``check`` would refuse now (the caller may still answer without the engine)."""
        return None if self.refusal() is not None else self._ticket()

    def _ticket(self) -> Ticket:
        ticket = Ticket()
        self._tickets.add(ticket)
        return ticket

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
        self._tickets.discard(ticket)

    def _refuse(self, refusal: Unavailable | None) -> None:
        """Count and raise ``refusal``, if there is one."""
        if refusal is not None:
            self.refused[refusal.code] += 1
            raise refusal

    def prompt_refusal(self, tokens: int, received: float) -> Overloaded | None:
        """Whether a request whose prompt is built, ``tokens`` of it left to read, and
        which came at ``received`` (its TTFT runs from then) would miss the SLO: judged
        again at its slot by the prompt's length (``ServiceRate.reading``). The door
        judged a typical prompt; a conversation's later turn is longer, and its second
        look and prompt may have taken a while. An engine that holds no request takes it."""
        reading = self.rate.reading
        if self.ttft_slo is None or not reading.samples or not (self._holds or self._waiters):
            return None
        now = self.clock()
        typical = round(reading.tokens.value or 0.0)
        unread = [h for h in self._holds if h.first_token is None]
        # The prompts before it, less what the engine has read of the first of them; each
        # at its upper bound, as at the door: what slows one (a busy box) slows them all.
        ahead = sum(reading.upper(typical if h.tokens is None else h.tokens) for h in unread)
        if unread:
            ahead = max(0.0, ahead - (now - self._reading_since(min(h.granted for h in unread))))
        ahead += self.waiting * reading.upper(typical)
        slot_wait = 0.0
        if not self._slot_free:
            slot_wait = self.rate.slot_wait(self.waiting, self.slots, self._oldest_running(now))
        own = reading.upper(tokens)
        predicted = now - received + max(slot_wait, ahead) + own
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "prompt of %d tokens: %.3f s spent, %.3f s slot wait, %.3f s ahead, "
                "%.3f s own (%.3f s by the line): %.3f s predicted",
                tokens,
                now - received,
                slot_wait,
                ahead,
                own,
                reading.seconds(tokens),
                predicted,
            )
        if predicted <= self.ttft_slo:
            return None
        return Overloaded(
            f"the server is busy: a reply to this {tokens}-token prompt would start "
            f"{predicted:.1f} s after the request came, over the {self.ttft_slo:g} s it "
            "aims for; retry shortly",
            retry_after=max(1.0, predicted - self.ttft_slo),
        )

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
        await self._acquire(ticket, tokens, self.clock() if received is None else received)
        hold = Hold(granted=self.clock(), tokens=tokens)
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
                self.rate.record(self.clock() - hold.granted)

    async def _acquire(self, ticket: Ticket | None, tokens: int | None, received: float) -> None:
        if ticket in self._tickets:
            self._tickets.discard(ticket)  # judged at the door: the same request, not anew
        else:
            self._refuse(self.refusal())
        if tokens is not None:
            self._refuse(self.prompt_refusal(tokens, received))
        if self._slot_free:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that arrives with the slot, and a request whose client left would still run.
            async with asyncio.timeout(self.wait_limit):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return  # the slot arrived as the timer fired: keep it
            self.refused["queue_timeout"] += 1
            raise QueueTimeout(
                f"no capacity freed up within {self.wait_limit:g} s; retry shortly",
                retry_after=self._retry_after(),
            ) from None
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release()  # we were handed a slot but will not use it
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _retry_after(self) -> float:
        """Until a place in line is likely to free up (one slot's turn), at least 1 s."""
        service = self.rate.service.value
        return 1.0 if service is None else max(1.0, service / self.slots)

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes straight to the next in line
                return
        self._free += 1
