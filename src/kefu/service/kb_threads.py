"""The knowledge base's lock and its threads.

The knowledge base and the cache are not thread-safe, and changing them blocks (the
disk, a large refresh), so one lock admits one thread at a time: the knowledge base's own
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
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from kefu.threads import lower_priority

T = TypeVar("T")
# Up to this many entries a lookup runs on the event loop (a search is 1-2 ms at 10 000
# here); a larger knowledge base's search would hold every other request up for longer
# than the hop to the worker costs.
INLINE_MAX_ENTRIES = 10_000


class KbThreads:
    """The lock, the knowledge base's thread, and the import and read-ahead threads."""

    def __init__(self, engine_nice: int) -> None:
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
            initargs=(engine_nice, "reading the knowledge base ahead"),
        )

    async def run(self, fn: Callable[[], T]) -> T:
        """Run knowledge-base or cache work on the knowledge base's own thread."""

        def locked() -> T:
            with self._busy:
                self._started += 1
                return fn()

        self._submitted += 1
        return await asyncio.get_running_loop().run_in_executor(self._worker, locked)

    async def look_up(self, fn: Callable[[], T], entries: int) -> T:
        """Run a lookup (memory only) here, on the event loop, if no job is queued or
        running on the knowledge base and the cache and the knowledge base (``entries``
        long) is not too large to search here; else queue it on the knowledge base's
        thread."""
        small = entries <= INLINE_MAX_ENTRIES
        idle = self._started == self._submitted
        if small and idle and self._busy.acquire(blocking=False):
            try:
                return fn()
            finally:
                self._busy.release()
        return await self.run(fn)

    async def importing(self, fn: Callable[[], T]) -> T:
        """Run an import's embedding on the import thread, outside the lock."""
        return await asyncio.get_running_loop().run_in_executor(self._importer, fn)

    async def reading(self, fn: Callable[[], T]) -> T:
        """Run reading ahead on its low-priority thread, outside the lock."""
        return await asyncio.get_running_loop().run_in_executor(self._reader, fn)

    def shutdown(self) -> None:
        """Wait for the threads' jobs to finish, and end the threads."""
        self._worker.shutdown(wait=True)
        self._importer.shutdown(wait=True)
        self._reader.shutdown(wait=True)
