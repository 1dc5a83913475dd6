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
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from kefu import demo
from kefu.cache.answers import AnswerCache, CachedAnswer
from kefu.faq import decide as faq
from kefu.faq.decide import Evidence, Verdict
from kefu.faq.evidence import FINDINGS_BOUNDS, Features
from kefu.faq.fit import Candidate as Found
from kefu.faq.fit import Scored, candidates
from kefu.faq.labels import LABELS_FILE, Label, LabelLog, current
from kefu.faq.model import MODEL_FILE
from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import OrderBackend
from kefu.fastpath.router import Candidate, RouterConfig, Routing, Rules, read_rules, route
from kefu.knowledge.base import KB_FILE, Hit, KbChange, KnowledgeBase, prepared
from kefu.knowledge.embedder import Embedder, Vectors, embed_message
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.kb_words import read_texts
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.knowledge.second_look import SECOND_LOOK_FILE, Known, SecondLook, Transformer
from kefu.service.cache_upkeep import evict_affected
from kefu.service.calibration import Keeper, Seen
from kefu.service.judging import Judge
from kefu.service.plan import PASSAGE_FLOOR, Plan, Source, best_passages
from kefu.service.rule_answers import answer_by_rule
from kefu.service.second_look import SecondLooker
from kefu.settings import Settings
from kefu.text.message import Message
from kefu.text.words import language
from kefu.threads import lower_priority

log = logging.getLogger("kefu.fastpath")

T = TypeVar("T")
FOLLOW_UP = "the message follows on from an earlier one"
EXACT = "the question, word for word"
# Verdicts from traffic between two fits: each fit runs only the new ones through the looks.
REFIT_EVERY = 10
Spawn = Callable[[Coroutine[Any, Any, None]], object]
NO_FIRST_LOOK = "first look: no answer with several questions leads"
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
        demo_in_use: bool = False,
    ) -> None:
        self.settings = settings
        self.demo = demo_in_use
        self.orders = orders
        self.hours = hours
        self.router = RouterConfig(
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
        self.labels: LabelLog | None = None
        self.keeper = Keeper(
            settings.data_dir / MODEL_FILE,
            settings.faq_precision,
            settings.judge_error,
            seed=demo.FAQ_MODEL if demo_in_use else None,
        )
        self._seen = Seen()
        self.judge: Judge | None = None
        self._verdicts = 0

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
        self.kb = KnowledgeBase.open(data_dir / KB_FILE, self.embedder)
        if self.demo:
            change = self.kb.add(demo.entries())
            if change:
                log.info("the demo is in use: loaded its %d entries", len(change.added))
        self.kb.prepare()
        self.misses = MissLog(data_dir / MISSES_FILE)
        self.labels = LabelLog(data_dir / LABELS_FILE)
        self.keeper.open(self._current()[0])
        self.cache = AnswerCache(
            data_dir / "cache.db",
            threshold=self.settings.cache_threshold,
            ttl=self.settings.cache_ttl,
            embedder=f"{self.embedder.name}/{self.embedder.dim}",
        )
        if self.settings.second_look and self._transformer_factory is not None:
            seed = demo.VECTORS if self.demo else None
            look = SecondLook(self._transformer_factory(), data_dir / SECOND_LOOK_FILE, seed)
            self.second_look = SecondLooker(look)
        log.info("fast path ready: %d knowledge-base entries", len(self.kb))

    async def close(self) -> None:
        await self.keeper.close()

        def close() -> None:
            for part in (self.kb, self.cache, self.misses, self.labels):
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
        routing = route(read, config=self.router, rules=rules)
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
        if second_look and plan.tier == "llm" and not rules.follow_up:
            plan = await self._look_again(read, plan)
        if plan.routing.intent == "general" and plan.routing.reason is not None:
            await self._look_up(lambda: self._note_miss(read, plan.passages, plan.routing))
        return plan

    def _decide(self, evidence: Evidence) -> Verdict:
        return faq.decide(evidence, self.keeper.model, self.settings.faq_precision)

    def worth_reading(self, retrieval: Features) -> bool:
        """Whether the guard's findings could still lift the first look's candidate to
        the threshold: they can only lower P(right), so retrieval's features with each
        finding at its best bound it (the guard was a third of a first look's CPU)."""
        model, target = self.keeper.model, self.settings.faq_precision
        return model.highest("first", retrieval, FINDINGS_BOUNDS) >= model.threshold(target)

    async def _look_again(self, message: Message, declined: Plan) -> Plan:
        """The second look: e5's nearest answer, decided on its own evidence."""
        if self.second_look is None:
            return declined
        # The folded text: a message and its phone-typed twin are one to e5 too.
        nearest = await self.second_look.nearest(message.folded)
        if nearest is None:
            return declined
        evidence = await self._look_up(lambda: faq.second(self._knowledge(), message, nearest))
        if evidence is None:
            return declined
        verdict = self._decide(evidence)
        entry = evidence.entry
        if verdict.serve:
            candidate = Candidate("faq", verdict.probability, entry.id)
            reason = f"second look: e5 {nearest.similarity:.2f}, p {verdict.probability:.2f}"
            p, margin = verdict.probability, nearest.margin
            routing = Routing("faq", p, margin, (candidate,), reason=reason)
            source = Source("kb", entry.id, entry.question)
            return replace(
                declined,
                routing=routing,
                tier="faq",
                reply=entry.answer,
                source=source,
                passages=(),
            )
        if entry.id not in {e.id for e in declined.declined}:
            declined = replace(declined, declined=(*declined.declined, entry))
        candidate = Candidate("faq", verdict.probability, entry.id)
        others = tuple(c for c in declined.routing.candidates if c.intent != "faq")
        routing = Routing(
            "general",
            verdict.probability,
            nearest.margin,
            (candidate, *others),
            reason=verdict.reason,
        )
        declined = replace(declined, routing=routing)
        passages = declined.passages
        # The first look reads words, so it finds nothing across languages: the entry e5
        # found in another language goes to the LLM, which answers in the customer's.
        crossing = language(entry.answer) != declined.lang
        if crossing and entry.id not in {hit.entry.id for hit in passages}:
            passage = Hit(entry, nearest.similarity, 0.0, nearest.similarity)
            passages = (passage, *passages)[: max(self.settings.kb_passages, 1)]
        return replace(declined, passages=passages)

    def _exact(self, message: Message) -> Plan | None:
        """A knowledge-base question asked word for word: no search needed."""
        assert self.kb is not None
        entry = self.kb.exact(message)
        if entry is None:
            return None
        candidate = Candidate("faq", 1.0, entry.id)
        routing = Routing("faq", 1.0, 1.0, (candidate,), reason=EXACT)
        source = Source("kb", entry.id, entry.question)
        return Plan(routing, message.lang, "faq", entry.answer, source)

    def _search(self, message: Message, scope: str, rules: Rules) -> Plan:
        assert self.kb is not None
        assert self.cache is not None
        assert self.embedder is not None
        lang = message.lang
        vector = embed_message(self.embedder, message)
        k = max(self.settings.kb_passages, faq.HITS)
        hits = self.kb.search(message, query_vector=vector, k=k)
        routing, looked = self._first_look(message, hits, rules)
        declined = () if looked is None else (looked,)
        if routing.intent == "faq" and routing.faq is not None:
            entry = routing.faq.entry
            source = Source("kb", entry.id, entry.question)
            return Plan(routing, lang, "faq", entry.answer, source, vector=vector)
        passages = best_passages(hits, self.settings.kb_passages)
        if rules.follow_up:  # what it asks is in the conversation: not in the cache, nor for it
            return Plan(routing, lang, passages=passages)
        if self.settings.answer_cache:
            lookup = self.cache.lookup(scope, message, vector)
            if lookup.answer is not None:
                source = Source("cache", lookup.answer.id, lookup.answer.question)
                return Plan(routing, lang, "cache", lookup.answer.answer, source, vector=vector)
        return Plan(routing, lang, passages=passages, vector=vector, declined=declined)

    def _first_look(
        self, message: Message, hits: list[Hit], rules: Rules
    ) -> tuple[Routing, KbEntry | None]:
        """The first look's best answer and the verdict on it, as the route says it, and
        the candidate it looked at."""
        others = rules.candidates()
        if rules.follow_up:
            return Routing("general", 0.0, 1.0, tuple(others), reason=FOLLOW_UP), None
        worth = self.worth_reading
        evidence = faq.first(self._knowledge(), message, hits, worth_reading=worth)
        if evidence is None:
            return Routing("general", 0.0, 1.0, tuple(others), reason=NO_FIRST_LOOK), None
        verdict = self._decide(evidence)
        p, lead = verdict.probability, evidence.lead
        candidates = (Candidate("faq", p, evidence.entry.id), *others)
        if verdict.serve:
            hit = next(hit for hit in hits if hit.entry.id == evidence.entry.id)
            return Routing("faq", p, lead, candidates, faq=hit), evidence.entry
        routing = Routing("general", p, lead, candidates, reason=verdict.reason)
        return routing, evidence.entry

    def _note_miss(self, message: Message, hits: Sequence[Hit], routing: Routing) -> None:
        """A message the best FAQ nearly answered: a phrasing the knowledge base lacks."""
        if self.misses is None or not hits or routing.reason is None:
            return
        # Whether it carries the customer's own data, where the guard or the answer cache
        # read its entities already (kept in the message).
        read = self.settings.answer_cache or any(c.intent == "faq" for c in routing.candidates)
        personal = bool(message.entities.personal) if read else None
        # The router's choice (the best answer's phrasing), which need not be the top hit.
        chosen = next((c.detail for c in routing.candidates if c.intent == "faq"), None)
        best = next((hit for hit in hits if hit.entry.id == chosen), hits[0])
        if best.entry.kind == "faq" and best.score >= PASSAGE_FLOOR:
            self.misses.record(message, best.entry, best.score, routing.reason, personal=personal)

    def after_reply(self, message: str, plan: Plan, spawn: Spawn) -> None:
        """The judge, if there is one, on what this turn leaves open: the answer served,
        sometimes; the declined candidates the LLM read among its passages."""
        if self.judge is None or not message.strip():
            return
        if plan.tier == "faq" and plan.source is not None and plan.reply is not None:
            if plan.routing.reason != EXACT:
                served = KbEntry.make(plan.source.question, plan.reply)
                self.judge.after_reply(message, served, [], spawn)
        elif plan.tier == "llm":
            read = {hit.entry.id for hit in plan.passages}
            shown = [entry for entry in plan.declined if entry.id in read]
            if shown:
                self.judge.after_reply(message, None, shown, spawn)

    async def record_verdict(self, message: str, answer: str, said: bool) -> None:
        """A judge's verdict: a label, and a refit in a coming round."""
        labels = self.labels
        if labels is None:
            return
        await self.run(lambda: labels.add(message, answer, said))
        self._verdicts += 1
        if self._verdicts % REFIT_EVERY == 0:
            self.keeper.stale = True

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
            self._seen.forget()
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
        if await self.follow_second_look() == 0:
            self.keeper.follow(self._to_fit, self._observe_labels)

    def _current(self) -> tuple[str, list[Label]]:
        """The state a model is fitted to, and its labels (under the lock)."""
        assert self.misses is not None
        assert self.labels is not None
        return current(self._knowledge().entries(), self.misses, self.labels)

    async def _to_fit(self) -> tuple[str, list[Label]]:
        return await self.run(self._current)

    async def _observe_labels(self, labels: list[Label]) -> list[list[Scored]]:
        look = None if self.second_look is None else self.second_look.look

        def observing(label: Label, vector: Vectors | None) -> list[Found]:
            return candidates(self._knowledge(), look, label.text, vector, label.excluded)

        embed = None if self.second_look is None else self.second_look.embed
        return await self._seen.scored(
            labels, under_lock=self.run, embed=embed, observing=observing
        )

    async def calibrate(self) -> None:
        """Fit the decision to the knowledge base and its labels now; returns when done."""
        self.keeper.stale = True
        self.keeper.follow(self._to_fit, self._observe_labels)
        await self.keeper.settled()

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
