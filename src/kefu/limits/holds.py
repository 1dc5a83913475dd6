"""What admission hands out and keeps: a request's judgement, its ticket through the door,
its place in line, its hold on a slot, and a refusal's record (``admission.py``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from kefu.limits.outcomes import Rule
from kefu.limits.rates import Ewma


@dataclass(frozen=True, slots=True)
class Judgement:
    """What admission predicted for one request, seconds from its arrival."""

    estimate: float  # the rates' point estimate
    predicted: float  # calibrated: the estimate times the correction
    queued: bool  # a queue in front of it: the only place a prediction may refuse
    # The rule that says refuse (``Rule``), None where none does; ``shadow`` admits anyway.
    refusal: Rule | None
    # The engine's reading speed was measured: an estimate without it is no prediction,
    # and its outcome would teach the correction a ratio of thousands.
    measured: bool = True
    # Let in past the SLO before the outcomes could say whether such requests miss: the
    # one in flight that finds out (``Admission.judge``).
    probe: bool = False

    @property
    def refuse(self) -> bool:
        return self.refusal is not None


@dataclass(frozen=True, slots=True)
class Place:
    """A request's place in line: when it gives up waiting (admission's clock), and its
    judgement."""

    gives_up: float
    judgement: Judgement | None


@dataclass(eq=False)  # by identity: the running ones are kept in a set
class Hold:
    """One request's slot: when it came (its TTFT runs from then) and was granted, and
    (``Admission.first_token``) when its first token came, on the admission's clock."""

    received: float
    granted: float
    tokens: int | None = None  # of its prompt, left to read; None where not counted
    judgement: Judgement | None = None
    first_token: float | None = None
    emitted: int = 0  # tokens sent so far (``Admission.token``)
    last_token: float | None = None
    limit: int | None = None  # the most tokens its reply may send, where known
    reading: float = 0.0  # seconds the reading line gave its prompt when it was granted
    alone: bool = True  # granted with no other prompt being read


@dataclass(eq=False)
class Ticket:
    """A request let through the door (``Admission.check``) that has not taken its slot
    yet: it builds its prompt meanwhile, and the requests after it count that prompt as
    ahead of theirs. Uncounted, a cold start's burst would all pass the door before the
    first took its slot, build every prompt, and be refused at the slots.

    Tickets are numbered as given: a request's slot counts only the prompts of those given
    before its own (the ones after it take their slots after it). A ``tentative`` one is
    held while the fast path decides whether its message needs the engine at all: it counts
    as the share of such tickets that recently went on to a slot."""

    number: int = 0
    judgement: Judgement | None = None
    tentative: bool = False


class Tickets:
    """The tickets given and neither taken by a slot nor given back, numbered as given."""

    def __init__(self) -> None:
        self._open: set[Ticket] = set()
        self._numbers = itertools.count(1)
        # Of the tentative tickets that ended, the share that took a slot; whole (1) until
        # one has.
        self.taken_share = Ewma()

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[Ticket]:
        return iter(self._open)

    def __contains__(self, ticket: object) -> bool:
        return ticket in self._open

    def give(self, judgement: Judgement, *, tentative: bool = False) -> Ticket:
        ticket = Ticket(next(self._numbers), judgement, tentative)
        self._open.add(ticket)
        return ticket

    def end(self, ticket: Ticket, *, taken: bool) -> None:
        """``ticket`` was taken by its slot, or given back; nothing if it had ended."""
        if ticket not in self._open:
            return
        self._open.discard(ticket)
        if ticket.tentative:
            self.taken_share.add(1.0 if taken else 0.0)

    def before(self, ticket: Ticket | None) -> float:
        """Prompts the tickets given before ``ticket`` (all, if None) stand for."""
        share = self.taken_share.value
        share = 1.0 if share is None else share
        return sum(
            share if other.tentative else 1.0
            for other in self._open
            if ticket is None or other.number < ticket.number
        )


@dataclass(frozen=True, slots=True)
class Refusal:
    at: float  # wall clock, for /stats windows
    code: str
    slot_free: bool  # a free slot when it refused
    # Prompts let in but not read yet, or waiting in line, when it refused: a free slot
    # then is no room, the engine was busy reading ahead of it.
    reading: bool
