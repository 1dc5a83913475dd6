"""The knowledge-base worker: the knowledge base, the answer cache, the miss and label
logs and the second look's index, opened together on the knowledge base's thread
(``kb_threads.py``: its lock, and why lookups may run on the event loop) and kept there.

What keeps them true to each other lives here too: imports, changes and the cached
answers they evict, the refresh rounds that pick up the ``kefu kb`` / ``kefu cache``
commands' edits, reading the texts ahead for the FAQ guard, and the second look following
the knowledge base. The turn's decision on what they hold is ``fast_path.py``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import TypeVar

from kefu import demo
from kefu.cache.answers import AnswerCache, CachedAnswer
from kefu.faq.labels import LABELS_FILE, Label, LabelLog, current
from kefu.knowledge.base import KB_FILE, KbChange, KnowledgeBase, prepared
from kefu.knowledge.embedder import Embedder, Vectors
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.kb_words import read_texts
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.knowledge.second_look import SECOND_LOOK_FILE, Known, SecondLook, Transformer
from kefu.service.cache_upkeep import evict_affected
from kefu.service.kb_threads import KbThreads
from kefu.service.second_look import SecondLooker
from kefu.settings import Settings

log = logging.getLogger("kefu.fastpath")

T = TypeVar("T")
# Knowledge-base texts read ahead per round: about half a second of a thread of its own.
READ_AHEAD_TEXTS = 2000


class KbWorker:
    """The opened parts and their threads; ``KbWorker.open`` makes one."""

    def __init__(
        self,
        settings: Settings,
        threads: KbThreads,
        *,
        embedder: Embedder,
        kb: KnowledgeBase,
        cache: AnswerCache,
        misses: MissLog,
        labels: LabelLog,
        second_look: SecondLooker | None,
        on_change: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.threads = threads
        self.embedder = embedder
        self.kb = kb
        self.cache = cache
        self.misses = misses
        self.labels = labels
        self.second_look = second_look  # None: the second look is off
        # Called under the lock when the knowledge base changed, before the upkeep below.
        self._on_change = on_change

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        embedder_factory: Callable[[], Embedder],
        transformer_factory: Callable[[], Transformer] | None,
        demo_in_use: bool,
        on_change: Callable[[], None],
    ) -> KbWorker:
        """Open every part on the knowledge base's thread; a part that fails to open
        closes those opened before it, and the threads end."""
        threads = KbThreads(settings.engine_nice)

        def opening() -> KbWorker:
            data_dir = settings.data_dir
            data_dir.mkdir(parents=True, exist_ok=True)
            with ExitStack() as undo:
                embedder = embedder_factory()
                kb = KnowledgeBase.open(data_dir / KB_FILE, embedder)
                undo.callback(kb.close)
                demo_change = _follow_demo(kb, demo_in_use)
                kb.prepare()
                misses = MissLog(data_dir / MISSES_FILE)
                undo.callback(misses.close)
                labels = LabelLog(data_dir / LABELS_FILE)
                undo.callback(labels.close)
                cache = AnswerCache(
                    data_dir / "cache.db",
                    threshold=settings.cache_threshold,
                    ttl=settings.cache_ttl,
                    embedder=f"{embedder.name}/{embedder.dim}",
                )
                undo.callback(cache.close)
                if demo_change:  # the answers cached from the other shop's entries go
                    threshold = settings.cache_threshold
                    evict_affected(cache, embedder, demo_change, cache_threshold=threshold)
                second_look = None
                if settings.second_look and transformer_factory is not None:
                    seed = demo.VECTORS if demo_in_use else None
                    look = SecondLook(transformer_factory(), data_dir / SECOND_LOOK_FILE, seed)
                    second_look = SecondLooker(look)
                undo.pop_all()  # opened: ``close`` closes them from now on
            log.info("fast path ready: %d knowledge-base entries", len(kb))
            return cls(
                settings,
                threads,
                embedder=embedder,
                kb=kb,
                cache=cache,
                misses=misses,
                labels=labels,
                second_look=second_look,
                on_change=on_change,
            )

        try:
            return await threads.run(opening)
        except Exception:
            threads.shutdown()  # idle: the opening was its only job
            raise

    async def close(self) -> None:
        def close() -> None:
            for part in (self.kb, self.cache, self.misses, self.labels):
                part.close()

        await self.run(close)
        if self.second_look is not None:
            self.second_look.close()
        self.threads.shutdown()

    async def run(self, fn: Callable[[], T]) -> T:
        """Run knowledge-base or cache work on the knowledge base's thread, under its lock."""
        return await self.threads.run(fn)

    async def look_up(self, fn: Callable[[], T]) -> T:
        """Run a lookup on the event loop when the lock is free, else on the thread."""
        return await self.threads.look_up(fn, len(self.kb))

    def labelled(self) -> tuple[str, list[Label]]:
        """The state a model is fitted to, and its labels (under the lock)."""
        return current(self.kb.entries(), self.misses, self.labels)

    async def add_label(self, message: str, answer: str, said: bool) -> None:
        await self.run(lambda: self.labels.add(message, answer, said))

    async def remember(
        self, scope: str, message: str, reply: str, vector: Vectors, sources: Sequence[str]
    ) -> CachedAnswer | None:
        """Cache an LLM answer (unless the cache is off)."""
        if not self.settings.answer_cache:
            return None
        cache = self.cache
        return await self.run(lambda: cache.put(scope, message, reply, vector, sources=sources))

    # -- keeping the cache true to the knowledge base ----------------------------------------

    async def import_entries(self, entries: Sequence[KbEntry]) -> KbChange:
        """Add entries, embedding them and cutting their words on an import thread of
        their own: a large import must not hold the knowledge-base thread (and every
        customer's answer) for seconds."""
        todo = await self.read_kb(lambda kb: kb.needing_vectors(entries))
        embedder = self.embedder
        ready = await self.threads.importing(lambda: prepared(embedder, todo))
        return await self.change_kb(lambda kb: kb.add(entries, ready=ready))

    async def change_kb(self, change: Callable[[KnowledgeBase], KbChange]) -> KbChange:
        """Apply a knowledge-base change and evict the cached answers it affects."""

        def apply() -> KbChange:
            result = change(self.kb)
            self._after_change(result)
            return result

        return await self.run(apply)

    def _after_change(self, change: KbChange) -> None:
        """Rebuild what the FAQ guard reads, and evict the cached answers the change affects."""
        if change:
            self._on_change()
            self.kb.prepare()
            evict_affected(
                self.cache, self.embedder, change, cache_threshold=self.settings.cache_threshold
            )

    async def read_kb(self, read: Callable[[KnowledgeBase], T]) -> T:
        kb = self.kb
        return await self.run(lambda: read(kb))

    async def refresh(self) -> int:
        """Pick up changes the ``kefu kb`` / ``kefu cache`` commands made to the files, write
        what serving gathered (the cache's lookup records, the declined questions), read
        ahead and follow the second look. Returns how many entries the second look has left
        for later rounds."""

        def refresh() -> None:
            try:
                self._after_change(self.kb.refresh())
            finally:  # lookups never write: a failed KB refresh must not stop the cache's upkeep
                self.cache.refresh()
                self.cache.flush()  # lookups, hit counts and expiries since the last round
                self.misses.flush()

        await self.run(refresh)
        await self.read_ahead()
        return await self.follow_second_look()

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
            facts = await self.threads.reading(lambda: read_texts(texts))
            kb = self.kb
            await self.run(lambda: kb.learn(facts))
        return len(texts)


def _follow_demo(kb: KnowledgeBase, demo_in_use: bool) -> KbChange:
    """Load the demo's entries while it is in use; else remove any a shop's own knowledge
    base was imported over."""
    if demo_in_use:
        change = kb.add(demo.entries())
        if change:
            log.info("the demo is in use: loaded its %d entries", len(change.added))
        return change
    left = [entry.id for entry in kb.entries() if entry.source == demo.SOURCE]
    if not left:
        return KbChange()
    log.info("the demo is not in use: removing its %d entries", len(left))
    return kb.remove(left)
