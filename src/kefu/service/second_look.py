"""The second look in a turn: its thread and its backlog.

The transformer's passes (20-70 ms of a core each) run on one thread of their own, so
neither the event loop nor the knowledge-base lock waits for them; the decision on the
entry it finds (``faq.decide.second``) runs where the fast path runs its lookups, under
the lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from kefu.knowledge.embedder import Vectors
from kefu.knowledge.second_look import Known, Nearest, SecondLook

log = logging.getLogger("kefu.fastpath")

# Knowledge-base texts embedded per refresh round: a few seconds of the thread, so a
# round never keeps it from a customer's question for long.
FOLLOW_BATCH = 128
# Second looks waiting or running at most: past that, a message goes on to the LLM path
# and its admission control as it did without one, so a burst never queues customers
# without bound behind the transformer.
BACKLOG = 8


class SecondLooker:
    def __init__(self, look: SecondLook) -> None:
        self.look = look
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kefu-second-look")
        self._under_way = 0  # counted on the event loop only

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
