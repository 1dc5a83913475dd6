"""Serialise turns of one session: the second waits (bounded), then fails with SessionBusy.

Two turns of one conversation at once would both read the same history and
store their replies out of order. In-process locks are enough while one
process serves; a shared store (Redis) brings its own lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kefu.errors import SessionBusy


class SessionLocks:
    def __init__(self, wait_seconds: float) -> None:
        self.wait_seconds = wait_seconds
        # A lock lives only while someone holds or waits for it, so the map never grows unbounded.
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(session_id, (asyncio.Lock(), 0))
        self._locks[session_id] = (lock, users + 1)
        try:
            try:
                async with asyncio.timeout(self.wait_seconds):  # not wait_for: see admission.py
                    await lock.acquire()
            except TimeoutError:
                raise SessionBusy(
                    f"another message on session {session_id} is still being answered; "
                    f"waited {self.wait_seconds:g} s",
                    param="session_id",
                ) from None
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[session_id]
            if users == 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)
