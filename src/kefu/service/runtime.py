"""Everything a request needs, built once per app lifespan (no module-level state)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kefu.engine.base import Engine, Finished, GenerationEvent, GenerationRequest
from kefu.errors import EngineNotReady, EngineUnavailable, KefuError, NotFound, UpstreamError
from kefu.fastpath.hours import ServiceHours
from kefu.knowledge.embedder import Vectors
from kefu.limits.admission import Admission
from kefu.limits.holds import Hold, Ticket
from kefu.memory.keeper import MemoryKeeper, MemoryPolicy
from kefu.observe.metrics import GroupLoad, LoadSnapshot
from kefu.observe.observer import Observer, SpanSink
from kefu.observe.timeline import Timeline
from kefu.service.access import Access
from kefu.service.fast_path import FastPath
from kefu.service.first_prompt import read_first_prompts
from kefu.service.groups import Group, Groups
from kefu.service.handoff import availability, waiting_plan
from kefu.service.outbound import Outbound
from kefu.service.plan import Plan
from kefu.service.replication import Replication
from kefu.sessions.claims import Claims, LocalClaims
from kefu.sessions.events import SessionEvents
from kefu.sessions.locks import SessionLocks
from kefu.settings import Settings
from kefu.store.base import SessionStore

log = logging.getLogger("kefu.service")

T = TypeVar("T")
# Entries whose answers /chat counts (Runtime.asked); a knowledge base that changes for
# months would otherwise keep a count for every entry it ever had.
ASKED_MAX = 10_000


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    store: SessionStore
    admission: Admission
    locks: SessionLocks
    hours: ServiceHours
    # None when --fast-path is off, or until its knowledge base and cache are open.
    fast_path: FastPath | None = None
    events: SessionEvents = field(default_factory=SessionEvents)
    started_at: float = field(default_factory=time.time)
    ready: bool = False
    load_error: str | None = None
    fast_path_error: str | None = None
    # Work that runs after a reply (storing the turn); awaited at shutdown so nothing is lost.
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    # A session's turn being stored after its reply went out; readers of that session wait.
    pending_writes: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    # Auth and limits; None with --auth none (nobody is refused or limited).
    access: Access | None = None
    # With --redis: tells the other replicas of knowledge-base changes and cached answers.
    replication: Replication | None = None
    # Which agent answers each handed-off conversation (Redis-held with --redis).
    claims: Claims = field(default_factory=LocalClaims)
    # Platforms whose conversations an agent's reply must reach too: the channels that
    # open once the runtime they answer through exists add themselves (app.py).
    outbound: list[Outbound] = field(default_factory=list)
    # Where each request's spans go (--otel-endpoint); None: nowhere.
    spans: SpanSink | None = None
    # How often each FAQ entry answered since start: the chat page suggests the most asked.
    # At most ASKED_MAX entries (``count_asked``): ids of entries long removed go in time.
    asked: Counter[str] = field(default_factory=Counter)
    # A next prompt is being read ahead (``read_ahead.py``): one at a time, and the
    # session whose turn ended meanwhile, read next.
    reading_ahead: bool = False
    read_ahead_next: str | None = None
    observer: Observer = field(init=False)
    # Prompts are built (and tokenized) here, off the event loop; ``close`` waits for them,
    # so no tokenization outlives the model.
    prompts: ThreadPoolExecutor = field(init=False)
    # Summaries of long conversations, built after the reply (--memory summary).
    memory: MemoryKeeper = field(init=False)
    # The model groups, each an engine with its own admission; the default one's are
    # ``engine`` (or the default pool of it) and ``admission``.
    groups: Groups = field(init=False)

    def __post_init__(self) -> None:
        self.prompts = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kefu-prompt")
        settings = self.settings
        policy = MemoryPolicy(
            window=settings.history_turns,
            every=settings.memory_every,
            summary_tokens=settings.summary_tokens,
            timeout=settings.summary_timeout,
            order_pattern=settings.order_pattern,
            order_example=settings.order_example,
            persona=settings.persona,
        )
        self.memory = MemoryKeeper(
            engine=self.engine, store=self.store, policy=policy, settled=self.settled
        )
        self.groups = Groups.of(
            self.engine, self.admission, self._admission_like, settings.unknown_model
        )
        # It reads the load, memory and groups.
        self.observer = Observer(self.load_snapshot, self.spans)

    def _admission_like(self, slots: int | None) -> Admission:
        """Another group's admission, built as the default group's (``slots`` None: as
        many as it has)."""
        default = self.admission
        return Admission(
            slots=slots or default.slots,
            max_waiting=default.max_waiting,
            timeout=default.timeout,
            ttft_slo=default.ttft_slo,
            policy=default.policy,
            shadow=default.shadow,
            quantile=default.outcomes.quantile,
        )

    async def build_prompt(self, build: Callable[[], T]) -> T:
        """Run ``build`` on a prompt thread: tokenizing a long conversation takes
        milliseconds that every other request would wait for on the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.prompts, build)

    async def close(self) -> None:
        """Wait for the prompts being built and drop the summaries in flight; call before
        the engine closes."""
        await self.memory.close()
        await asyncio.to_thread(self.prompts.shutdown, wait=True)

    def load_snapshot(self) -> LoadSnapshot:
        return LoadSnapshot(
            engine=self.engine.stats(),
            admitted=self.admission.running,
            waiting=self.admission.waiting,
            ready=self.ready,
            memory=self.memory.work(),
            admission=self.admission,
            groups=tuple(
                GroupLoad(g.name, g.admission.running, g.admission.waiting, g.admission.refused)
                for g in self.groups
            ),
        )

    def count_asked(self, entry_id: str) -> None:
        self.asked[entry_id] += 1
        if len(self.asked) > ASKED_MAX:  # the less asked half goes
            self.asked = Counter(dict(self.asked.most_common(ASKED_MAX // 2)))

    def spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task[Any]) -> None:
        self.background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background work failed", exc_info=task.exception())

    def write_behind(self, session_id: str, work: Coroutine[Any, Any, Any]) -> None:
        """Store after the response ended; ``settled`` makes later readers wait for it."""
        task = self.spawn(work)
        self.pending_writes[session_id] = task

        def forget(done: asyncio.Task[Any]) -> None:
            if self.pending_writes.get(session_id) is done:
                del self.pending_writes[session_id]

        task.add_done_callback(forget)

    async def settled(self, session_id: str) -> None:
        """Wait until the session's last turn is stored (read your own writes)."""
        pending = self.pending_writes.get(session_id)
        if pending is not None:
            await asyncio.wait({pending})  # its failure is logged by spawn, not raised here

    async def drain(self) -> None:
        if self.background:
            await asyncio.gather(*self.background, return_exceptions=True)

    async def start_engine(self) -> None:
        """Start the engine; the embedded one then reads a first turn's prompt, cold and
        warm, and admission's reading line starts from the warm read (``first_prompt.py``)."""
        started = time.perf_counter()
        try:
            await self.engine.start()
            if self.settings.warmup and self.settings.engine_kind == "llamacpp":
                warm = await read_first_prompts(
                    self.engine,
                    persona=self.settings.persona,
                    passages=await self._first_passages(),
                )
                self.admission.rate.reading.add(warm.tokens, warm.seconds)
        except Exception as exc:
            self.load_error = str(exc) or type(exc).__name__
            log.error("the engine failed to start: %s", self.load_error)
            return
        self.ready = True
        log.info(
            "ready in %.1f s: model %s, %d slots, context %d tokens",
            time.perf_counter() - started,
            self.engine.model_id,
            self.settings.parallel,
            self.engine.context_window,
        )

    async def _first_passages(self) -> list[tuple[str, str]]:
        """As many of the knowledge base's entries as a prompt carries. None while it is
        still opening: it usually opens first (0.3 s before the model here), and /v1, which
        needs no knowledge base, must not wait for a large first import."""
        if self.fast_path is None:
            return []
        count = self.settings.kb_passages
        return await self.fast_path.read_kb(
            lambda kb: [(e.question, e.answer) for e in kb.entries()[:count]]
        )

    async def remember(
        self,
        fast_path: FastPath,
        scope: str,
        message: str,
        reply: str,
        vector: Vectors,
        sources: Sequence[str],
    ) -> None:
        """Cache an LLM answer here and, with --redis, on every replica."""
        cached = await fast_path.remember(scope, message, reply, vector, sources)
        if cached is not None and self.replication is not None:
            await self.replication.answer_cached(scope, message, reply, vector, sources)

    def handoff_waiting(self, lang: str) -> Plan:
        return waiting_plan(lang, self.hours)

    def handoff_hours(self, lang: str = "en") -> tuple[bool, str]:
        return availability(self.hours, lang)

    def require_fast_path(self) -> FastPath:
        if self.fast_path is not None:
            return self.fast_path
        if not self.settings.fast_path:
            raise NotFound(
                "the knowledge base is off: this kefu runs with --fast-path false",
                param="fast_path",
            )
        raise EngineNotReady("the knowledge base is still loading; retry in a moment")

    async def start_fast_path(self, fast_path: FastPath) -> None:
        """Open the knowledge base and the cache; the fast path serves once they are open."""
        try:
            await fast_path.open()
        except Exception as exc:
            self.fast_path_error = str(exc) or type(exc).__name__
            log.error("the fast path failed to start: %s", self.fast_path_error, exc_info=exc)
            return
        self.fast_path = fast_path

    @property
    def serving(self) -> bool:
        """Ready for every kind of request: the model, and the fast path unless it is off."""
        return self.ready and (self.fast_path is not None or not self.settings.fast_path)

    def check_ready(self, group: Group | None = None) -> None:
        if self.load_error is not None:
            raise EngineNotReady(f"the engine failed to start: {self.load_error}", retry_after=30)
        if not self.ready:
            raise EngineNotReady("the model is still loading; retry in a moment", retry_after=2)
        # A pool of remote engines whose every breaker is open: a 503 now, before the
        # response starts, rather than an error event inside a 200 stream.
        engine = self.engine if group is None else group.engine
        if not getattr(engine, "accepting", True):
            raise EngineUnavailable(
                "every engine is down or tripped; retry shortly",
                retry_after=self.settings.breaker_cooldown,
            )

    @asynccontextmanager
    async def admitted(
        self,
        timeline: Timeline,
        ticket: Ticket,
        unread: int | None = None,
        group: Group | None = None,
    ) -> AsyncIterator[Hold]:
        """Hold an engine slot of ``group`` (default: the default group), for the request
        ``ticket`` let through its door, whose prompt leaves ``unread`` tokens to read;
        fails fast with Overloaded or QueueFull, or QueueTimeout after waiting. The hold
        goes to ``generate``, which reports its first token."""
        group = group or self.groups.default
        self.check_ready(group)
        timeline.mark("admitted")
        received = timeline.marks["received"]
        async with group.admission.slot(ticket, tokens=unread, received=received) as hold:
            if hold.judgement is not None:
                timeline.outcome.predicted_ttft = hold.judgement.predicted
            yield hold

    async def generate(
        self, request: GenerationRequest, timeline: Timeline, hold: Hold
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Engine events for a request that holds ``hold``, an admission slot of its group;
        marks the timeline and tells admission when the first token came."""
        group = self.groups.get(request.group)
        timeline.outcome.group = group.name
        admission = group.admission
        hold.limit = request.sampling.max_tokens
        try:
            async with aclosing(group.engine.generate(request)) as events:
                async for event in events:
                    if isinstance(event, Finished):
                        timeline.mark_engine(event.timings)
                        timeline.finished(event.usage, event.finish_reason)
                        timeline.routed(event.routed)
                    else:
                        admission.token(hold)
                    yield event
        except KefuError as exc:
            timeline.outcome.error = exc.code
            if isinstance(exc, UpstreamError):
                timeline.outcome.engine = exc.engine or None
            raise
