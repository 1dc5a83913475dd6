"""The fast path: answers that need no model, decided before the LLM is asked.

Rules first (a handoff request, an order number, smalltalk: no embedding at
all), then a knowledge-base question asked word for word, or one embedding of the
message (the static word table: tens of microseconds) shared by the knowledge-base
search and the answer cache.

This is the turn's side: reading, planning, the first and second looks, the judge after
the reply and the calibration that follows its verdicts. The knowledge base, the cache
and the logs they read are the knowledge-base worker's (``kb_worker.py``), and so is the
lock a lookup takes (``kb_threads.py``: why a lookup runs on the event loop when it can).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from kefu import demo
from kefu.cache.answers import AnswerCache, CachedAnswer
from kefu.faq import decide as faq
from kefu.faq.decide import Evidence, Verdict
from kefu.faq.evidence import FINDINGS_BOUNDS, Features
from kefu.faq.fit import Candidate as Found
from kefu.faq.fit import Scored, candidates
from kefu.faq.judge import known_checks
from kefu.faq.labels import Label
from kefu.faq.model import MODEL_FILE
from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import OrderBackend
from kefu.fastpath.router import Candidate, RouterConfig, Routing, Rules, read_rules, route
from kefu.knowledge.base import Hit, KbChange, KnowledgeBase
from kefu.knowledge.embedder import Embedder, Vectors, embed_message
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.second_look import Transformer
from kefu.service.calibration import Keeper, Seen
from kefu.service.judging import Judge
from kefu.service.kb_worker import KbWorker
from kefu.service.plan import PASSAGE_FLOOR, Plan, Source, best_passages
from kefu.service.rule_answers import answer_by_rule
from kefu.service.second_look import SecondLooker
from kefu.settings import Settings
from kefu.text.message import Message
from kefu.text.words import language

log = logging.getLogger("kefu.fastpath")

T = TypeVar("T")
FOLLOW_UP = "the message follows on from an earlier one"
EXACT = "the question, word for word"
# Verdicts from traffic between two fits: each fit runs only the new ones through the looks.
REFIT_EVERY = 10
Spawn = Callable[[Coroutine[Any, Any, None]], object]
NO_FIRST_LOOK = "first look: no answer with several questions leads"


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
        self._transformer_factory = transformer_factory
        # The worker's opening, a task of its own from ``open`` on: an ``open`` cancelled
        # while the thread opens the parts (a shutdown while loading) leaves it running,
        # and ``close`` closes what it opened.
        self._opening: asyncio.Task[KbWorker] | None = None
        self.keeper = Keeper(
            settings.data_dir / MODEL_FILE,
            settings.faq_precision,
            settings.judge_error,
            seed=demo.FAQ_MODEL if demo_in_use else None,
        )
        self._seen = Seen()
        self.judge: Judge | None = None
        self._judge_check: asyncio.Task[None] | None = None
        self._verdicts = 0

    @property
    def worker(self) -> KbWorker:
        """The knowledge base, the cache and the logs, opened: a turn only meets a fast
        path ``open`` has returned from."""
        opening = self._opening
        if opening is None or not opening.done():
            raise RuntimeError("the fast path is not open")
        return opening.result()

    @property
    def kb(self) -> KnowledgeBase:
        return self.worker.kb

    @property
    def cache(self) -> AnswerCache:
        return self.worker.cache

    @property
    def embedder(self) -> Embedder:
        return self.worker.embedder

    @property
    def second_look(self) -> SecondLooker | None:
        """None when the second look is off."""
        return self.worker.second_look

    async def run(self, fn: Callable[[], T]) -> T:
        """Run knowledge-base or cache work on the knowledge base's own thread."""
        return await self.worker.run(fn)

    async def open(self) -> None:
        self._opening = asyncio.create_task(
            KbWorker.open(
                self.settings,
                embedder_factory=self._embedder_factory,
                transformer_factory=self._transformer_factory,
                demo_in_use=self.demo,
                on_change=self._changed,
            )
        )
        worker = await asyncio.shield(self._opening)
        # The stored model, if it was fitted to this state (read under the lock).
        await worker.run(lambda: self.keeper.open(worker.labelled()[0]))
        # One round before the first customer (the whole demo: about 0.25 s, beside the
        # model's loading); a larger knowledge base is read on in the refresh rounds.
        try:
            await worker.read_ahead()
        except Exception:  # only time is lost: the guard reads what it needs itself
            log.exception("reading the knowledge base ahead failed")
        await worker.follow_second_look()

    async def close(self) -> None:
        if self._judge_check is not None:
            self._judge_check.cancel()
            await asyncio.gather(self._judge_check, return_exceptions=True)
        await self.keeper.close()
        opening = self._opening
        if opening is not None:
            await asyncio.wait([opening])  # still opening if ``open`` was cancelled
            # One that failed closed what it had opened.
            if not opening.cancelled() and opening.exception() is None:
                await opening.result().close()
        await self.orders.close()

    def scope(self, tenant: str) -> str:
        """Cached answers are kept apart per persona and tenant."""
        return AnswerCache.scope(self.settings.persona, tenant)

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
        worker = self.worker
        plan = await worker.look_up(lambda: self._exact(read) or self._search(read, scope, rules))
        if second_look and plan.tier == "llm" and not rules.follow_up:
            plan = await self._look_again(read, plan)
        if plan.routing.intent == "general" and plan.routing.reason is not None:
            await worker.look_up(lambda: self._note_miss(read, plan.passages, plan.routing))
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
        worker = self.worker
        if worker.second_look is None:
            return declined
        # The folded text: a message and its phone-typed twin are one to e5 too.
        nearest = await worker.second_look.nearest(message.folded)
        if nearest is None:
            return declined
        evidence = await worker.look_up(lambda: faq.second(worker.kb, message, nearest))
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
        entry = self.worker.kb.exact(message)
        if entry is None:
            return None
        candidate = Candidate("faq", 1.0, entry.id)
        routing = Routing("faq", 1.0, 1.0, (candidate,), reason=EXACT)
        source = Source("kb", entry.id, entry.question)
        return Plan(routing, message.lang, "faq", entry.answer, source)

    def _search(self, message: Message, scope: str, rules: Rules) -> Plan:
        worker = self.worker
        lang = message.lang
        vector = embed_message(worker.embedder, message)
        k = max(self.settings.kb_passages, faq.HITS)
        hits = worker.kb.search(message, query_vector=vector, k=k)
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
            lookup = worker.cache.lookup(scope, message, vector)
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
        evidence = faq.first(self.worker.kb, message, hits, worth_reading=worth)
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
        if not hits or routing.reason is None:
            return
        # Whether it carries the customer's own data, where the guard or the answer cache
        # read its entities already (kept in the message).
        read = self.settings.answer_cache or any(c.intent == "faq" for c in routing.candidates)
        personal = bool(message.entities.personal) if read else None
        # The router's choice (the best answer's phrasing), which need not be the top hit.
        chosen = next((c.detail for c in routing.candidates if c.intent == "faq"), None)
        best = next((hit for hit in hits if hit.entry.id == chosen), hits[0])
        if best.entry.kind == "faq" and best.score >= PASSAGE_FLOOR:
            misses = self.worker.misses
            misses.record(message, best.entry, best.score, routing.reason, personal=personal)

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

    async def check_judge(self, judge: Judge) -> None:
        """The judge on the knowledge base's known questions, before any verdict: its
        error there is taken out of its verdicts (at least ``--judge-error``)."""
        worker = self.worker
        known = await worker.run(lambda: known_checks(worker.kb.entries(), seed=0))
        reliability = await judge.check(known)
        if reliability is not None and not reliability.useless:
            self.keeper.judge_error = max(self.settings.judge_error, reliability.error)
            self.keeper.stale = True

    async def record_verdict(self, message: str, answer: str, said: bool) -> None:
        """A judge's verdict: a label, and a refit in a coming round."""
        await self.worker.add_label(message, answer, said)
        self._verdicts += 1
        if self._verdicts % REFIT_EVERY == 0:
            self.keeper.stale = True

    async def remember(
        self, scope: str, message: str, reply: str, vector: Vectors, sources: Sequence[str]
    ) -> CachedAnswer | None:
        """Cache an LLM answer; the caller has checked it depends on no earlier turn."""
        return await self.worker.remember(scope, message, reply, vector, sources)

    # -- the knowledge base, through its worker ----------------------------------------------

    async def import_entries(self, entries: Sequence[KbEntry]) -> KbChange:
        """Add entries, embedded on an import thread of their own."""
        return await self.worker.import_entries(entries)

    async def change_kb(self, change: Callable[[KnowledgeBase], KbChange]) -> KbChange:
        """Apply a knowledge-base change and evict the cached answers it affects."""
        return await self.worker.change_kb(change)

    async def read_kb(self, read: Callable[[KnowledgeBase], T]) -> T:
        return await self.worker.read_kb(read)

    async def read_ahead(self) -> int:
        return await self.worker.read_ahead()

    async def follow_second_look(self) -> int:
        return await self.worker.follow_second_look()

    async def refresh(self) -> None:
        """A refresh round of the worker; once the second look has embedded every entry,
        a refit if the knowledge base or its labels changed; the judge's check, once."""
        if self.judge is not None and self.judge.may_check():
            self._judge_check = asyncio.create_task(self.check_judge(self.judge))
        if await self.worker.refresh() == 0:
            self.keeper.follow(self._to_fit, self._observe_labels)

    # -- keeping the decision fitted -----------------------------------------------------------

    def _changed(self) -> None:
        """The knowledge base changed (under its lock): the fit and what it saw are stale."""
        self.keeper.stale = True
        self._seen.forget()

    async def _to_fit(self) -> tuple[str, list[Label]]:
        worker = self.worker
        return await worker.run(worker.labelled)

    async def _observe_labels(self, labels: list[Label]) -> list[list[Scored]]:
        worker = self.worker
        look = None if worker.second_look is None else worker.second_look.look

        def observing(label: Label, vector: Vectors | None) -> list[Found]:
            return candidates(worker.kb, look, label.text, vector, label.excluded)

        embed = None if worker.second_look is None else worker.second_look.embed
        return await self._seen.scored(
            labels, under_lock=worker.run, embed=embed, observing=observing
        )

    async def calibrate(self) -> None:
        """Fit the decision to the knowledge base and its labels now; returns when done."""
        self.keeper.stale = True
        self.keeper.follow(self._to_fit, self._observe_labels)
        await self.keeper.settled()
