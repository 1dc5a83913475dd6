"""Admission control: at most ``slots`` requests in the engine, at most ``max_waiting`` in line.

A full line fails at once with QueueFull (503 + Retry-After) instead of growing
without bound; a request that waits longer than ``timeout`` fails with
QueueTimeout. Slots are handed over first-come, first-served.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kefu.errors import QueueFull, QueueTimeout


class Admission:
    def __init__(self, *, slots: int, max_waiting: int, timeout: float) -> None:
        self.slots = slots
        self.max_waiting = max_waiting
        self.timeout = timeout
        self._free = slots
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def running(self) -> int:
        return self.slots - self._free

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    async def _acquire(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        if self.waiting >= self.max_waiting:
            raise QueueFull(
                f"the server is at capacity ({self.slots} running, {self.waiting} waiting); "
                "retry shortly",
                retry_after=1.0,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that arrives with the slot, and a request whose client left would still run.
            async with asyncio.timeout(self.timeout):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return  # the slot arrived as the timer fired: keep it
            raise QueueTimeout(
                f"no capacity freed up within {self.timeout:g} s; retry shortly",
                retry_after=1.0,
            ) from None
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release()  # we were handed a slot but will not use it
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes straight to the next in line
                return
        self._free += 1
