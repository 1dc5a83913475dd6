"""The per-session lock across replicas: a Redis lease taken with SET NX.

Turns of one session in this process first queue on the in-process lock (in
order, without polling Redis); the one at the head then takes the Redis lease,
polling for it while another replica holds it, up to --session-wait in all, then
SessionBusy (409) as on one process. The lease is renewed while the turn runs, so a
long answer keeps it, and a replica that dies lets it go after LEASE_SECONDS. A lease
left behind because Redis was down at its release (or whose taking went unanswered)
is released by the session's next turn on the same replica.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from kefu.errors import SessionBusy, StateUnavailable
from kefu.sessions.locks import SessionLocks
from kefu.shared.client import RedisClient

LEASE_SECONDS = 30.0
POLL_SECONDS = 0.02

# Deletes the lease only if it is still ours (it may have expired and been retaken).
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class RedisSessionLocks(SessionLocks):
    def __init__(self, wait_seconds: float, client: RedisClient) -> None:
        super().__init__(wait_seconds)
        self.client = client
        self._release = client.redis.register_script(RELEASE)
        self._renew = client.redis.register_script(RENEW)
        # Leases this process could not release (Redis was down): no turn of ours holds
        # them, so the next turn of the session here lets them go instead of waiting.
        self._stale: dict[str, str] = {}

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        deadline = time.monotonic() + self.wait_seconds
        async with super().hold(session_id):
            key = f"kefu:lock:{session_id}"
            token = uuid.uuid4().hex
            lease_ms = int(LEASE_SECONDS * 1000)
            stale = self._stale.get(key)
            if stale is not None:  # kept until Redis takes the release
                await self.client.call("unlock", lambda r: self._release(keys=[key], args=[stale]))
                del self._stale[key]
            while not await self._take(key, token, lease_ms):
                if time.monotonic() >= deadline:
                    raise SessionBusy(
                        f"another message on session {session_id} is still being answered; "
                        f"waited {self.wait_seconds:g} s",
                        param="session_id",
                    )
                await asyncio.sleep(POLL_SECONDS)
            renewing = asyncio.create_task(self._keep(key, token, lease_ms))
            try:
                yield
            finally:
                renewing.cancel()
                with suppress(asyncio.CancelledError):
                    await renewing
                try:
                    await self.client.call(
                        "unlock", lambda r: self._release(keys=[key], args=[token])
                    )
                except StateUnavailable:
                    self._forget_later(key, token)

    async def _take(self, key: str, token: str, lease_ms: int) -> bool:
        try:
            return bool(
                await self.client.call("lock", lambda r: r.set(key, token, nx=True, px=lease_ms))
            )
        except StateUnavailable:
            # Redis may have taken the lease before the answer was lost: let it go later.
            self._forget_later(key, token)
            raise

    def _forget_later(self, key: str, token: str) -> None:
        """The session's next turn here releases this lease; past 10 000 such, their
        own expiry does."""
        if len(self._stale) >= 10_000:
            self._stale.clear()
        self._stale[key] = token

    async def _keep(self, key: str, token: str, lease_ms: int) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            try:
                await self.client.call(
                    "lock.renew", lambda r: self._renew(keys=[key], args=[token, lease_ms])
                )
            except StateUnavailable:
                continue  # tried again a third of a lease later
