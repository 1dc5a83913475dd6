"""The second look in a turn: its thread, its backlog, and the exchange between the
transformer (``knowledge/second_look.py``) and the FAQ guard.

The transformer's passes (20-70 ms of a core each) run on one thread of their own, so
neither the event loop nor the knowledge-base lock waits for them; the guard runs where
the fast path runs its lookups, under the lock, a millisecond each time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.second_look import FORGIVEN_MAX, Known, Nearest, Pick, SecondLook

log = logging.getLogger("kefu.fastpath")

# Knowledge-base texts embedded per refresh round: a few seconds of the thread, so a
# round never keeps it from a customer's question for long.
FOLLOW_BATCH = 128
# Second looks waiting or running at most: past that, a message goes on to the LLM path
# and its admission control as it did without one, so a burst never queues customers
# without bound behind the transformer.
BACKLOG = 8

Incidental = Callable[[Sequence[str]], bool]
# The guard's verdict on the picked entry, with the transformer's verdicts so far: the
# entry and its objection (None: it may answer), or None when the entry is gone since.
Judge = Callable[[Pick, Incidental], Awaitable[tuple[KbEntry, str | None] | None]]


@dataclass(frozen=True, slots=True)
class Answer:
    entry: KbEntry
    pick: Pick
    forgiven: tuple[str, ...]  # the words the transformer called incidental

    @property
    def reason(self) -> str:
        reason = f"second look: e5 {self.pick.similarity:.2f}, margin {self.pick.margin:.2f}"
        if self.forgiven:
            reason += "; incidental: " + ", ".join(self.forgiven)
        return reason


class SecondLooker:
    def __init__(self, look: SecondLook) -> None:
        self.look = look
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kefu-second-look")
        self._under_way = 0  # counted on the event loop only

    async def answer(self, message: str, judge: Judge) -> Answer | None:
        """The entry to answer with, or None (the LLM answers, as without a second look)."""
        if self._under_way >= BACKLOG:
            return None
        self._under_way += 1
        try:
            return await self._answer(message, judge)
        finally:
            self._under_way -= 1

    async def _answer(self, message: str, judge: Judge) -> Answer | None:
        loop = asyncio.get_running_loop()
        pick = await loop.run_in_executor(self._thread, self.look.pick, message)
        if pick is None:
            return None
        # Each set of words the guard would object to goes to the transformer, which may
        # call it incidental; the guard runs again with every verdict so far.
        verdicts: dict[tuple[str, ...], bool] = {}
        unjudged: list[tuple[str, ...]] = []

        def incidental(words: Sequence[str]) -> bool:
            if tuple(words) not in verdicts:
                unjudged.append(tuple(words))
            return verdicts.get(tuple(words), False)

        while True:
            unjudged.clear()
            judged = await judge(pick, incidental)
            if judged is None:
                return None
            entry, objection = judged
            if objection is None:
                forgiven = tuple(word for words in verdicts for word in words)
                return Answer(entry, pick, forgiven)
            if not unjudged or sum(map(len, verdicts)) + len(unjudged[0]) > FORGIVEN_MAX:
                return None
            words = unjudged[0]
            verdicts[words] = await loop.run_in_executor(
                self._thread, self.look.incidental, message, pick, words
            )
            if not verdicts[words]:
                return None

    async def nearest(self, message: str) -> Nearest | None:
        """The nearest answer for the calibrated decision; None past the backlog."""
        if self._under_way >= BACKLOG:
            return None
        self._under_way += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._thread, self._nearest, message)
        finally:
            self._under_way -= 1

    def _nearest(self, message: str) -> Nearest | None:
        return self.look.nearest(self.look.model.embed_queries([message])[0])

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """The calibration's probes, on the transformer's thread, between customers' passes."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self.look.model.embed_queries, texts)

    async def follow(self, entries: Sequence[Known]) -> int:
        """Embed up to ``FOLLOW_BATCH`` texts of entries not embedded yet and forget the
        removed ones. Returns how many entries are left for later rounds."""
        loop = asyncio.get_running_loop()
        left = await loop.run_in_executor(self._thread, self.look.sync, entries, FOLLOW_BATCH)
        if left:
            log.info("second look: %d knowledge-base entries left to embed", left)
        return left

    def close(self) -> None:
        self._thread.shutdown(wait=True)
