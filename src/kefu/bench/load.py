"""Load of one level: a fixed number of users (closed loop) or Poisson arrivals (open loop).

Users: each of N customers runs one session after another, with its think time between
turns and none between sessions (a new customer takes the freed seat at once).
Rate: customer sessions start at random times, ``rate`` per second on average (exponential
gaps), however many are already running; each runs its turns as above.

Either way a level is bounded: no request starts after ``requests`` have started or
``duration`` seconds have passed, and each request is cut after ``timeout`` seconds, so a
level ends by duration + timeout at the latest.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass, field
from typing import Literal

from kefu.bench.client import Clients, Clock, Conversation, Target, send
from kefu.bench.record import RequestRecord
from kefu.bench.workload import Workload

Mode = Literal["users", "rate"]
# Level i uses session indices from i * SESSION_SPACE on: no two levels share a session, so
# a "unique" message is unique across the whole run and cannot hit a cache warmed earlier.
SESSION_SPACE = 1_000_000


@dataclass(frozen=True)
class LevelPlan:
    index: int
    mode: Mode
    load: float  # users, or sessions per second
    requests: int
    duration: float
    timeout: float
    seed: int = 0

    @property
    def label(self) -> str:
        if self.mode == "rate":
            return f"{self.load:g} sessions/s"
        return f"{self.load:g} user" + ("" if self.load == 1 else "s")


@dataclass
class LevelState:
    """What the tasks of one level share; the progress display reads it."""

    plan: LevelPlan
    started: float
    records: list[RequestRecord] = field(default_factory=list)
    sent: int = 0
    in_flight: int = 0

    @property
    def deadline(self) -> float:
        return self.started + self.plan.duration

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.records)

    def take(self, now: float) -> bool:
        """Claim the budget for one more request; False once the level must stop sending."""
        if self.sent >= self.plan.requests or now >= self.deadline:
            return False
        self.sent += 1
        return True


class Level:
    """Runs one level's load; ``state`` is readable while it runs."""

    def __init__(
        self,
        clients: Clients,
        target: Target,
        workload: Workload,
        plan: LevelPlan,
        clock: Clock,
    ) -> None:
        self.clients = clients
        self.target = target
        self.workload = workload
        self.plan = plan
        self.clock = clock
        self.state = LevelState(plan, clock())

    async def run(self) -> list[RequestRecord]:
        self.state = LevelState(self.plan, self.clock())
        if self.plan.mode == "users":
            await self._users(int(self.plan.load))
        else:
            await self._arrivals(self.plan.load)
        return sorted(self.state.records, key=lambda r: r.sent)

    async def _users(self, users: int) -> None:
        sessions = itertools.count(self.plan.index * SESSION_SPACE)

        async def user() -> None:
            while await self._session(next(sessions)):
                pass

        async with asyncio.TaskGroup() as group:
            for _ in range(users):
                group.create_task(user())

    async def _arrivals(self, rate: float) -> None:
        rng = random.Random(f"kefu-bench-arrivals:{self.plan.seed}:{self.plan.index}")
        state = self.state
        next_at = state.started
        async with asyncio.TaskGroup() as group:
            for index in range(self.plan.requests):  # a session sends at least one request
                next_at += rng.expovariate(rate)
                if next_at >= state.deadline or state.sent >= self.plan.requests:
                    break
                await asyncio.sleep(max(0.0, next_at - self.clock()))
                group.create_task(self._session(self.plan.index * SESSION_SPACE + index))

    async def _session(self, index: int) -> bool:
        """Run one session's turns; False once the level has no budget left."""
        state, clock = self.state, self.clock
        session = self.workload.session(index)
        conversation = Conversation(self.target)
        for turn, message in enumerate(session.messages, start=1):
            if turn > 1 and (pause := session.think[turn - 2]) > 0:
                await asyncio.sleep(min(pause, max(0.0, state.deadline - clock())))
            if not state.take(clock()):
                return False
            record = RequestRecord(
                level=self.plan.index,
                load=self.plan.load,
                session=index,
                turn=turn,
                kind=message.kind,
                sent=0.0,
                end=0.0,
            )
            state.in_flight += 1
            try:
                await send(
                    self.clients.for_session(index),
                    conversation,
                    message,
                    record,
                    clock=clock,
                    limit_s=self.plan.timeout,
                )
            finally:
                state.in_flight -= 1
            state.records.append(record)
        return True
