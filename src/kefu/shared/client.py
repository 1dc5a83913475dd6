"""One bounded Redis pool per process, and every call under a timeout.

A call that fails or takes too long raises StateUnavailable (a 503 with
Retry-After), never hangs and never surfaces as a 500. A call is tried at most
twice (a pooled connection a restarted Redis dropped fails on first use), within
the one budget; the next request simply tries again, which is how recovery is
automatic once Redis is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from kefu.errors import StateUnavailable

T = TypeVar("T")
log = logging.getLogger("kefu.redis")

# op name, seconds, failed: fed to the metrics (kefu_redis_seconds, kefu_redis_errors).
CallObserver = Callable[[str, float, bool], None]


class RedisClient:
    def __init__(self, url: str, *, pool_size: int, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.pool = BlockingConnectionPool.from_url(
            url,
            max_connections=pool_size,
            timeout=timeout,  # waiting for a free connection counts against the budget too
            socket_timeout=max(timeout, 1.0),
            socket_connect_timeout=max(timeout, 1.0),
            # One retry at once: a pooled connection Redis dropped (a restart) fails on
            # first use; the budget below bounds the whole call either way.
            retry=Retry(NoBackoff(), 1),
        )
        self.redis: Redis = Redis(connection_pool=self.pool)
        self.observe: CallObserver = lambda op, seconds, failed: None
        self._down_since: float | None = None

    async def call(
        self, op: str, work: Callable[[Redis], Awaitable[T]], budget: float | None = None
    ) -> T:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(budget or self.timeout):
                result = await work(self.redis)
        # RuntimeError: redis-py writing to a transport that a dying Redis closed.
        except (RedisError, OSError, TimeoutError, RuntimeError) as exc:
            self.observe(op, time.perf_counter() - started, True)
            self._note_down(op, exc)
            raise StateUnavailable(
                "the shared state (Redis) is not answering; retry in a moment", retry_after=1
            ) from None
        self.observe(op, time.perf_counter() - started, False)
        if self._down_since is not None:
            log.warning("Redis answers again after %.1f s", time.monotonic() - self._down_since)
            self._down_since = None
        return result

    def _note_down(self, op: str, exc: BaseException) -> None:
        if self._down_since is None:  # once per outage, not once per request
            self._down_since = time.monotonic()
            log.error(
                "Redis failed (%s: %s); requests that need it get 503", op, type(exc).__name__
            )

    async def ping(self) -> bool:
        try:
            await self.call("ping", lambda r: r.ping())
        except StateUnavailable:
            return False
        return True

    async def close(self) -> None:
        await self.redis.aclose()
        await self.pool.aclose()
