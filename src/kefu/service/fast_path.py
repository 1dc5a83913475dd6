"""The fast path: answers that need no model, decided before the LLM is asked.

Rules first (a handoff request, an order number, smalltalk: no embedding at
all), then a knowledge-base question asked word for word, or one embedding of the
message (the static word table: tens of microseconds) shared by the knowledge-base
search and the answer cache.

The knowledge base and the cache are not thread-safe, and changing them blocks (the
disk, a large refresh), so one lock admits one thread at a time: the fast path's own
thread for everything that writes or may take long, and the event loop itself for a
lookup when nobody holds the lock (the usual case) and the knowledge base is not too
large to search there (``INLINE_MAX_ENTRIES``). A lookup is a millisecond or two of
in-memory work that holds the GIL wherever it runs; sending it to the thread and back
cost two thread handoffs, which under load were most of its tail. The event loop never
waits for the lock: a lookup that finds it taken queues on the thread. Imports embed on
a thread of their own, so a large one does not hold up answers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

from kefu.cache.answers import AnswerCache, CachedAnswer
from kefu.calibration.features import first_look
from kefu.calibration.fit import Observation
from kefu.calibration.model import CALIBRATION_FILE, Calibration
from kefu.calibration.probes import Probe
from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import OrderBackend
from kefu.fastpath.router import Candidate, RouterConfig, Routing, Rules, read_rules, route
from kefu.knowledge.base import Hit, KbChange, KnowledgeBase, prepared
from kefu.knowledge.embedder import Embedder, Vectors, embed_message
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.kb_words import read_texts
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.knowledge.second_look import SECOND_LOOK_FILE, Known, Pick, SecondLook, Transformer
from kefu.service import decision
from kefu.service.cache_upkeep import evict_affected
from kefu.service.calibration import Keeper, calibrate
from kefu.service.plan import PASSAGE_FLOOR, Plan, Source, best_passages
from kefu.service.rule_answers import answer_by_rule
from kefu.service.second_look import Incidental, SecondLooker
from kefu.settings import Settings
from kefu.text.message import Message
from kefu.threads import lower_priority

log = logging.getLogger("kefu.fastpath")

T = TypeVar("T")
# Knowledge-base texts read ahead per round: about half a second of a thread of its own.
READ_AHEAD_TEXTS = 2000
# Up to this many entries a lookup runs on the event loop (a search is 1-2 ms at 10 000
# here); a larger knowledge base's search would hold every other request up for longer
# than the hop to the worker costs.
INLINE_MAX_ENTRIES = 10_000


class FastPath:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder_factory: Callable[[], Embedder],
        orders: OrderBackend,
        hours: ServiceHours,
        transformer_factory: Callable[[], Transformer] | None = None,
    ) -> None:
        self.settings = settings
        self.orders = orders
        self.hours = hours
        self.router = RouterConfig(
            faq_threshold=settings.faq_threshold,
            faq_threshold_zh=settings.faq_threshold_zh,
            faq_margin=settings.faq_margin,
            order_pattern=settings.order_pattern,
            order_example=settings.order_example,
            shop_name=settings.shop_name,
        )
        self._embedder_factory = embedder_factory
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kefu-fastpath")
        # Held by whoever works on the knowledge base, the cache or the miss log: a job of
        # the worker, or a lookup on the event loop (see the module's docstring).
        self._busy = threading.Lock()
        # Jobs given to the worker, and of those started: a lookup never overtakes a job
        # queued before it (a cache put, a KB change). One writer each: the loop, the worker.
        self._submitted = 0
        self._started = 0
        self._importer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kefu-kb-import")
        # Not the import thread: a large import would hold the rounds up behind it. At the
        # decode threads' niceness: it is background work, as decoding is to the fast path.
        self._reader = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="kefu-kb-read",
            initializer=lower_priority,
            initargs=(settings.engine_nice, "reading the knowledge base ahead"),
        )
        self._transformer_factory = transformer_factory
        self.second_look: SecondLooker | None = None
        self.embedder: Embedder | None = None
        self.kb: KnowledgeBase | None = None
        self.cache: AnswerCache | None = None
        self.misses: MissLog | None = None
        self.keeper = Keeper(settings.data_dir / CALIBRATION_FILE, settings.faq_precision)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run knowledge-base or cache work on the fast path's own thread."""

        def locked() -> T:
            with self._busy:
                self._started += 1
                return fn()

        self._submitted += 1
        return await asyncio.get_running_loop().run_in_executor(self._worker, locked)

    async def _look_up(self, fn: Callable[[], T]) -> T:
        """Run a lookup (memory only) here, on the event loop, if no job is queued or
        running on the knowledge base and the cache and the knowledge base is not too
        large to search here; else queue it on the fast path's thread."""
        small = self.kb is not None and len(self.kb) <= INLINE_MAX_ENTRIES
        idle = self._started == self._submitted
        if small and idle and self._busy.acquire(blocking=False):
            try:
                return fn()
            finally:
                self._busy.release()
        return await self.run(fn)

    async def open(self) -> None:
        await self.run(self._open)
        # One round before the first customer (the whole demo: about 0.25 s, beside the
        # model's loading); a larger knowledge base is read on in the refresh rounds.
        try:
            await self.read_ahead()
        except Exception:  # only time is lost: the guard reads what it needs itself
            log.exception("reading the knowledge base ahead failed")
        await self.follow_second_look()

    def _open(self) -> None:
        data_dir = self.settings.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.embedder = self._embedder_factory()
        self.kb = KnowledgeBase.open(data_dir / "knowledge.db", self.embedder)
        if len(self.kb) == 0 and self.settings.demo_kb:
            change = self.kb.load_demo()
            log.info("knowledge base was empty: loaded the demo (%d entries)", len(change.added))
        self.kb.prepare()
        if self.settings.faq_calibration:
            self.keeper.open(self.kb.entries())
        self.misses = MissLog(data_dir / MISSES_FILE)
        self.cache = AnswerCache(
            data_dir / "cache.db",
            threshold=self.settings.cache_threshold,
            ttl=self.settings.cache_ttl,
            embedder=f"{self.embedder.name}/{self.embedder.dim}",
        )
        if self.settings.second_look and self._transformer_factory is not None:
            look = SecondLook(
                self._transformer_factory(),
                data_dir / SECOND_LOOK_FILE,
                margin=self.settings.second_look_margin,
            )
            self.second_look = SecondLooker(look)
        log.info("fast path ready: %d knowledge-base entries", len(self.kb))

    async def close(self) -> None:
        await self.keeper.close()

        def close() -> None:
            for part in (self.kb, self.cache, self.misses):
                if part is not None:
                    part.close()

        await self.run(close)
        if self.second_look is not None:
            self.second_look.close()
        self._worker.shutdown(wait=True)
        self._importer.shutdown(wait=True)
        self._reader.shutdown(wait=True)
        await self.orders.close()

    def scope(self, tenant: str) -> str:
        """Cached answers are kept apart per persona and tenant."""
        return AnswerCache.scope(self.settings.persona, tenant)

    def _knowledge(self) -> KnowledgeBase:
        """The knowledge base, for work under its lock once ``open`` made it."""
        assert self.kb is not None
        return self.kb

    # -- deciding ---------------------------------------------------------------------------

    def read(self, message: str) -> Message:
        """The message read once (``kefu.text.message``), with this shop's order numbers:
        every step of ``plan`` reads this, none normalises the text again."""
        return self.router.read(message)

    async def plan(
        self, message: str | Message, *, scope: str, failures: int, second_look: bool = True
    ) -> Plan:
        """``second_look`` False: the first look only (the turn knows the engine could not
        take the message, and the transformer's pass would only delay its refusal)."""
        read = self.router.read(message)
        rules = read_rules(read, failures=failures, config=self.router)
        routing = route(read, (), config=self.router, rules=rules)
        if routing.intent in ("handoff", "order_status", "smalltalk"):
            return await answer_by_rule(
                routing,
                read.lang,
                rules.mistyped_order_id,
                settings=self.settings,
                orders=self.orders,
                hours=self.hours,
            )
        plan = await self._look_up(lambda: self._exact(read) or self._search(read, scope, rules))
        if (
            second_look
            and plan.tier == "llm"
            and plan.routing.intent == "general"
            and not rules.follow_up
        ):
            if self.keeper.calibration is not None:
                return await self._look_again_calibrated(read, plan, self.keeper.calibration)
            return await self._look_again(read, plan) or plan
        return plan

    async def _look_again_calibrated(
        self, message: Message, declined: Plan, calibration: Calibration
    ) -> Plan:
        """The second look, weighed by the calibrated decision (``decide_second``)."""
        if self.second_look is None:
            return declined
        # The folded text: a message and its phone-typed twin are one to e5 too.
        nearest = await self.second_look.nearest(message.folded)
        if nearest is None:
            return declined
        judged = await self._look_up(
            lambda: decision.second_look_features(self._knowledge(), message, nearest)
        )
        if judged is None:
            return declined
        entry, features = judged
        return decision.decide_second(
            declined, entry, nearest, features, calibration, kb_passages=self.settings.kb_passages
        )

    async def _look_again(self, message: Message, declined: Plan) -> Plan | None:
        """The second look (``service/second_look.py``), before the LLM."""
        if self.second_look is None:
            return None

        async def judge(pick: Pick, incidental: Incidental) -> tuple[KbEntry, str | None] | None:
            return await self._look_up(
                lambda: decision.judge(self._knowledge(), message, pick, incidental)
            )

        answer = await self.second_look.answer(message.folded, judge)
        if answer is None:
            return None
        entry, pick = answer.entry, answer.pick
        candidate = Candidate("faq", pick.similarity, entry.id)
        routing = Routing("faq", pick.similarity, pick.margin, (candidate,), reason=answer.reason)
        source = Source("kb", entry.id, entry.question)
        return replace(
            declined, routing=routing, tier="faq", reply=entry.answer, source=source, passages=()
        )

    def _exact(self, message: Message) -> Plan | None:
        """A knowledge-base question asked word for word: no search needed."""
        assert self.kb is not None
        entry = self.kb.exact(message)
        if entry is None:
            return None
        candidate = Candidate("faq", 1.0, entry.id)
        routing = Routing("faq", 1.0, 1.0, (candidate,), reason="the question, word for word")
        source = Source("kb", entry.id, entry.question)
        return Plan(routing, message.lang, "faq", entry.answer, source)

    def _search(self, message: Message, scope: str, rules: Rules) -> Plan:
        assert self.kb is not None
        assert self.cache is not None
        assert self.embedder is not None
        lang = message.lang
        vector = embed_message(self.embedder, message)
        hits = self.kb.search(
            message, query_vector=vector, k=max(self.settings.kb_passages, decision.ROUTER_HITS)
        )
        routing = route(message, hits, config=self.router, rules=rules)
        calibration = self.keeper.calibration
        # Whether the FAQ guard or the answer cache reads the entities (once, kept in
        # the message): then the miss log knows whether they are the customer's own data.
        entities = routing.intent == "faq" or self.settings.answer_cache or calibration is not None
        if calibration is not None:
            first = first_look(hits)
            routing = decision.decide_first(self.kb, message, first, routing, calibration, rules)
        if routing.intent == "faq" and routing.faq is not None:
            entry = routing.faq.entry
            # The calibrated decision weighed the guard's objection already.
            objection = (
                None if calibration is not None else decision.objection(self.kb, message, entry)
            )
            if objection is None:
                source = Source("kb", entry.id, entry.question)
                return Plan(routing, lang, "faq", entry.answer, source, vector=vector)
            routing = replace(routing, intent="general", faq=None, reason=objection)
        personal = bool(message.entities.personal) if entities else None
        self._note_miss(message, hits, routing, personal)
        if rules.follow_up:  # what it asks is in the conversation: not in the cache, nor for it
            return Plan(routing, lang, passages=best_passages(hits, self.settings.kb_passages))
        if self.settings.answer_cache:
            lookup = self.cache.lookup(scope, message, vector)
            if lookup.answer is not None:
                source = Source("cache", lookup.answer.id, lookup.answer.question)
                return Plan(routing, lang, "cache", lookup.answer.answer, source, vector=vector)
        return Plan(
            routing, lang, passages=best_passages(hits, self.settings.kb_passages), vector=vector
        )

    def _note_miss(
        self, message: Message, hits: Sequence[Hit], routing: Routing, personal: bool | None
    ) -> None:
        """A message the best FAQ nearly answered: a phrasing the knowledge base lacks.
        ``personal``: whether it carries the customer's own data, when already read."""
        if self.misses is None or not hits or routing.reason is None:
            return
        # The router's choice (the best answer's phrasing), which need not be the top hit.
        chosen = next((c.detail for c in routing.candidates if c.intent == "faq"), None)
        best = next((hit for hit in hits if hit.entry.id == chosen), hits[0])
        if best.entry.kind == "faq" and best.score >= PASSAGE_FLOOR:
            self.misses.record(message, best.entry, best.score, routing.reason, personal=personal)

    async def remember(
        self, scope: str, message: str, reply: str, vector: Vectors, sources: Sequence[str]
    ) -> CachedAnswer | None:
        """Cache an LLM answer; the caller has checked it depends on no earlier turn."""
        cache = self.cache
        if cache is None or not self.settings.answer_cache:
            return None
        return await self.run(lambda: cache.put(scope, message, reply, vector, sources=sources))

    # -- keeping the cache true to the knowledge base ----------------------------------------

    async def import_entries(self, entries: Sequence[KbEntry]) -> KbChange:
        """Add entries, embedding them and cutting their words on an import thread of
        their own: a large import must not hold the knowledge-base thread (and every
        customer's answer) for seconds."""
        todo = await self.read_kb(lambda kb: kb.needing_vectors(entries))
        loop = asyncio.get_running_loop()
        embedder = self.embedder
        assert embedder is not None
        ready = await loop.run_in_executor(self._importer, prepared, embedder, todo)
        return await self.change_kb(lambda kb: kb.add(entries, ready=ready))

    async def change_kb(self, change: Callable[[KnowledgeBase], KbChange]) -> KbChange:
        """Apply a knowledge-base change and evict the cached answers it affects."""

        def apply() -> KbChange:
            assert self.kb is not None
            result = change(self.kb)
            self._after_change(result)
            return result

        return await self.run(apply)

    def _after_change(self, change: KbChange) -> None:
        """Rebuild what the FAQ guard reads, and evict the cached answers the change affects."""
        if change:
            assert self.kb is not None
            self.keeper.stale = True
            self.kb.prepare()
            if self.cache is not None and self.embedder is not None:
                evict_affected(
                    self.cache, self.embedder, change, cache_threshold=self.settings.cache_threshold
                )

    async def read_kb(self, read: Callable[[KnowledgeBase], T]) -> T:
        def run() -> T:
            assert self.kb is not None
            return read(self.kb)

        return await self.run(run)

    async def refresh(self) -> None:
        """Pick up changes the ``kefu kb`` / ``kefu cache`` commands made to the files, and
        write what serving gathered (the cache's lookup records, the declined questions)."""

        def refresh() -> None:
            assert self.kb is not None
            assert self.cache is not None
            try:
                self._after_change(self.kb.refresh())
            finally:  # lookups never write: a failed KB refresh must not stop the cache's upkeep
                self.cache.refresh()
                self.cache.flush()  # lookups, hit counts and expiries since the last round
                if self.misses is not None:
                    self.misses.flush()

        await self.run(refresh)
        await self.read_ahead()
        if await self.follow_second_look() == 0 and self.settings.faq_calibration:
            self.keeper.follow(lambda: self.read_kb(KnowledgeBase.entries), self.calibrate)

    async def calibrate(self) -> Calibration:
        """Fit the decision to the knowledge base as it is now (``service/calibration.py``)."""
        entries = await self.read_kb(KnowledgeBase.entries)
        look = None if self.second_look is None else self.second_look.look

        def probing(probe: Probe, vector: Vectors | None) -> Observation:
            return decision.observe(self._knowledge(), look, probe, vector)

        embed = None if self.second_look is None else self.second_look.embed
        return await calibrate(
            entries,
            self.settings.faq_precision,
            under_lock=self.run,
            embed=embed,
            probing=probing,
        )

    async def follow_second_look(self) -> int:
        """Give the second look the knowledge base's texts it has not embedded yet (the
        demo's ship embedded) and forget the removed ones. Returns how many entries are
        left for later rounds."""
        if self.second_look is None:
            return 0
        entries = await self.read_kb(lambda kb: [Known.of(entry) for entry in kb.entries()])
        return await self.second_look.follow(entries)

    async def read_ahead(self) -> int:
        """Read the entities of up to ``READ_AHEAD_TEXTS`` knowledge-base texts the FAQ
        guard has not seen yet, on a thread of their own: otherwise the first message
        about an answer pays a few milliseconds for its questions'. Returns how many
        texts were read."""
        texts = await self.read_kb(lambda kb: kb.unread(READ_AHEAD_TEXTS))
        if texts:
            loop = asyncio.get_running_loop()
            facts = await loop.run_in_executor(self._reader, read_texts, texts)
            kb = self.kb
            assert kb is not None
            await self.run(lambda: kb.learn(facts))
        return len(texts)
