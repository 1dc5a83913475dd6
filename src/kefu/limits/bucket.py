"""Per-caller limits: a token bucket of requests and a cap on answers running at once.

One ``acquire`` decides both, so the Redis backend can do it in one atomic script
(one round trip) and N replicas enforce one limit exactly. A stream taken by
``acquire`` is given back by ``release`` once the answer ends.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from kefu.limits.rate import Rate

Refusal = Literal["rate", "streams"]


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    limit: int  # the bucket's size (0: no rate limit)
    remaining: int  # whole requests left in the bucket
    reset: float  # seconds until the bucket is full again
    retry_after: float  # seconds until a request would pass (0 when allowed)
    refusal: Refusal | None = None


UNLIMITED = Decision(True, 0, 0, 0.0, 0.0)


class Limiter(Protocol):
    async def acquire(
        self, identity: str, rate: Rate | None, max_streams: int, stream: str | None
    ) -> Decision:
        """Take one request from ``identity``'s bucket and, when ``stream`` is given, one
        of its ``max_streams`` (0 = no cap) under that ticket; nothing is taken when refused."""
        ...

    async def release(self, identity: str, stream: str) -> None: ...

    async def close(self) -> None: ...


@dataclass
class _Bucket:
    tokens: float
    at: float
    full_at: float  # when it is full again: from then on, forgetting it changes nothing


class LocalLimiter:
    """In-process limits: right for one replica; with several, use Redis."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._streams: dict[str, set[str]] = {}

    async def acquire(
        self, identity: str, rate: Rate | None, max_streams: int, stream: str | None
    ) -> Decision:
        streams = self._streams.get(identity, set())
        if stream is not None and max_streams and len(streams) >= max_streams:
            return Decision(False, rate.requests if rate else 0, 0, 0.0, 1.0, "streams")
        decision = UNLIMITED if rate is None else self._take(identity, rate)
        if decision.allowed and stream is not None and max_streams:
            self._streams.setdefault(identity, streams).add(stream)
        return decision

    def _take(self, identity: str, rate: Rate) -> Decision:
        now = self.clock()
        per_second = rate.requests / rate.seconds
        bucket = self._buckets.get(identity)
        if bucket is None:
            self._drop_full(now)
            bucket = self._buckets[identity] = _Bucket(rate.requests, now, now)
        tokens = min(rate.requests, bucket.tokens + (now - bucket.at) * per_second)
        bucket.tokens, bucket.at = tokens, now
        if tokens < 1:
            reset = (rate.requests - tokens) / per_second
            return Decision(False, rate.requests, 0, reset, (1 - tokens) / per_second, "rate")
        bucket.tokens = tokens - 1
        reset = (rate.requests - bucket.tokens) / per_second
        bucket.full_at = now + reset
        return Decision(True, rate.requests, math.floor(bucket.tokens), reset, 0.0)

    def _drop_full(self, now: float, every: int = 4096) -> None:
        """Forget buckets that are full again: the map does not grow without bound."""
        if len(self._buckets) % every == every - 1:
            stale = [key for key, b in self._buckets.items() if b.full_at <= now]
            for key in stale:
                del self._buckets[key]

    async def release(self, identity: str, stream: str) -> None:
        streams = self._streams.get(identity)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self._streams[identity]

    async def close(self) -> None:
        return None
