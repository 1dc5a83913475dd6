"""A pool of remote engines that is itself an Engine, so service/ does not know it is there.

Each request goes to one engine (engine/routing.py: affinity on its routing key, unless
that engine is busier than the least loaded by --imbalance); an engine that fails before
the first token reached the caller (refused, an error status, no token within
--first-token-timeout) counts a failure on its breaker and the request goes to the next
engine. Once text has gone out, a failure is the caller's (an error event, never a
hang). A checker task, off the request path, health-checks every engine and reads its
own /metrics every --engine-check-interval seconds.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import replace

from kefu.engine.base import (
    DEFAULT_GROUP,
    ChatMessage,
    EngineStats,
    Finished,
    GenerationEvent,
    GenerationRequest,
    Routed,
    UpstreamStats,
)
from kefu.engine.breaker import Breaker
from kefu.engine.remote import RemoteEngine
from kefu.engine.routing import Candidate, Routing, choose
from kefu.engine.token_count import EstimatedCount, TokenCounter, probe_upstream
from kefu.engine.upstream_metrics import EngineLoad
from kefu.errors import EngineUnavailable, FirstTokenTimeout, UpstreamError

log = logging.getLogger("kefu.engine")

TTFT_SAMPLES = 256  # recent first-token times kept per engine, for its p50


class Member:
    """One engine of the pool, with what the pool knows of it."""

    def __init__(self, engine: RemoteEngine, breaker: Breaker) -> None:
        self.engine = engine
        self.name = engine.name
        self.breaker = breaker
        self.healthy = True
        self.load: EngineLoad | None = None
        self.requests = 0
        self.failures = 0
        self.timeouts = 0
        self.ttft_ms: deque[float] = deque(maxlen=TTFT_SAMPLES)

    def pressure(self) -> float:
        queue = self.load.queue if self.load is not None else None
        return self.engine.in_flight + (queue or 0.0)

    def row(self) -> UpstreamStats:
        load = self.load or EngineLoad()
        return UpstreamStats(
            name=self.name,
            url=self.engine.upstream.url,
            model=self.engine.model_id,
            breaker=self.breaker.state,
            in_flight=self.engine.in_flight,
            queue=load.queue,
            kv_usage=load.kv_usage,
            requests=self.requests,
            failures=self.failures,
            timeouts=self.timeouts,
            ttft_p50_ms=round(statistics.median(self.ttft_ms), 3) if self.ttft_ms else None,
            healthy=self.healthy,
            group=self.engine.upstream.group,
        )


class EnginePool:
    passes_fields = True  # every engine of it is a RemoteEngine

    def __init__(
        self,
        engines: Sequence[RemoteEngine],
        *,
        routing: Routing,
        imbalance: float,
        failures: int,
        cooldown: float,
        check_interval: float,
        counter: TokenCounter | None = None,
        group: str = DEFAULT_GROUP,
    ) -> None:
        """``group``: the model group its engines serve (one pool each)."""
        if not engines:
            raise ValueError("a pool needs at least one engine")
        self.group = group
        self.members = [Member(e, Breaker(failures=failures, cooldown=cooldown)) for e in engines]
        self.routing: Routing = routing
        self.imbalance = imbalance
        self.cooldown = cooldown
        self.check_interval = check_interval
        self.counter: TokenCounter = counter or EstimatedCount()
        self._counter_given = counter is not None
        self._turn = 0
        self._checker: asyncio.Task[None] | None = None
        self.model_id = ""
        self.context_window = 0
        self._learn_identity()

    def _learn_identity(self) -> None:
        """The model name and window the pool shows: its engines', once they answered."""
        self.model_id = next(
            (m.engine.model_id for m in self.members if m.engine.model_known),
            self.members[0].engine.model_id,
        )
        self.context_window = min(m.engine.context_window for m in self.members)

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.counter.count_chat_tokens(messages)

    def model_ids(self) -> set[str]:
        """The models its engines serve, as far as known (a /v1 request names one)."""
        return {m.engine.model_id for m in self.members if m.engine.model_known}

    async def start(self) -> None:
        """Ask every engine for its model; one that does not answer starts tripped, and the
        checker lets it in once a health check passes. Starts with none answering too:
        engines often come up after kefu (requests get a fast 503 meanwhile)."""
        answered = await asyncio.gather(*(m.engine.discover() for m in self.members))
        for member, ok in zip(self.members, answered, strict=True):
            if not ok:
                member.healthy = False
                member.breaker.start_open()
                log.warning("engine %s does not answer yet; it gets no requests", member.name)
        if not self._counter_given:
            first = next((m for m, ok in zip(self.members, answered, strict=True) if ok), None)
            if first is not None:
                upstream = first.engine.upstream
                found = await asyncio.to_thread(
                    probe_upstream, upstream.root, first.engine.model_id, upstream.headers()
                )
                self.counter = found or self.counter
        for member in self.members:
            member.engine.counter = self.counter
        self._learn_identity()
        log.info("prompt tokens are counted by %s", self.counter.describe)
        self._checker = asyncio.create_task(self._watch())

    async def close(self) -> None:
        if self._checker is not None:
            self._checker.cancel()
            await asyncio.gather(self._checker, return_exceptions=True)
        await asyncio.gather(*(m.engine.close() for m in self.members))
        await asyncio.to_thread(self.counter.close)

    @property
    def accepting(self) -> bool:
        """Whether any engine may take a request now (all tripped: answer 503 at once)."""
        return any(m.breaker.allows() for m in self.members)

    def stats(self) -> EngineStats:
        rows = tuple(m.row() for m in self.members)
        return EngineStats(
            running=sum(r.in_flight for r in rows),
            slots=len(rows),
            engines=rows,
            token_counting=self.counter.describe,
        )

    def _route(self, key: str, tried: list[Member]) -> tuple[Member, str]:
        allowed = [m for m in self.members if m not in tried and m.breaker.allows()]
        if not allowed:
            states = ", ".join(f"{m.name} {m.breaker.state}" for m in self.members)
            what = "failed" if tried else "can take requests"
            raise EngineUnavailable(
                f"no engine {what} ({states}); retry shortly", retry_after=self.cooldown
            )
        by_name = {m.name: m for m in allowed}
        self._turn += 1
        picked = choose(
            [Candidate(m.name, m.pressure()) for m in allowed],
            routing=self.routing,
            key=key,
            imbalance=self.imbalance,
            turn=self._turn,
        )
        return by_name[picked.name], picked.reason

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        tried: list[Member] = []
        while True:
            member, reason = self._route(request.routing_key, tried)
            if tried:
                reason += f"; after {', '.join(m.name for m in tried)} failed"
            member.breaker.begin()
            member.requests += 1
            verdict: bool | None = None
            try:
                async with aclosing(member.engine.generate(request)) as events:
                    async for event in events:
                        if isinstance(event, Finished):
                            verdict = True
                            if event.timings.first_token is not None:
                                ttft = event.timings.first_token - (
                                    event.timings.prefill_started or event.timings.queued
                                )
                                member.ttft_ms.append(ttft * 1000)
                            routed = Routed(member.name, reason, len(tried) + 1, self.group)
                            event = replace(event, routed=routed)
                        yield event
                return
            except UpstreamError as exc:
                verdict = False
                member.failures += 1
                member.timeouts += isinstance(exc, FirstTokenTimeout)
                exc.engine = member.name
                if exc.started:
                    raise
                log.warning("%s; trying another engine", exc.message)
                tried.append(member)
            finally:
                if verdict is True:
                    member.breaker.succeeded()
                elif verdict is False:
                    member.breaker.failed()
                else:  # the caller left, or the request itself was refused
                    member.breaker.abandoned()

    async def _watch(self) -> None:
        while True:
            await asyncio.gather(*(self._check(m) for m in self.members))
            await asyncio.sleep(self.check_interval)

    async def _check(self, member: Member) -> None:
        healthy = await member.engine.healthy()
        if healthy != member.healthy:
            log.warning("engine %s is %s", member.name, "up" if healthy else "down")
        member.healthy = healthy
        if healthy:
            self._learn_identity()  # a late engine's model and window
            member.breaker.health_passed()
            member.load = await member.engine.load()
        else:
            member.breaker.health_failed()
            member.load = None
