"""Limits in Redis: one Lua script decides the token bucket and the stream cap atomically,
in one round trip, on Redis's own clock, so N replicas enforce one limit exactly.

When Redis cannot answer within --limits-timeout, --limits-on-redis-down decides:
'open' lets the request through (logged once per outage and counted), 'closed'
answers 503. Either way the next check tries Redis again.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress

from kefu.errors import StateUnavailable
from kefu.limits.bucket import UNLIMITED, Decision
from kefu.limits.rate import Rate
from kefu.shared.client import RedisClient

# A stream not given back (its replica died) stops counting after this long.
STREAM_LEASE_SECONDS = 600

# KEYS: bucket hash, streams zset. ARGV: size (0 = no bucket), period, max streams
# (0 = no cap), ticket ('' = not a stream), stream lease. Returns allowed, size,
# remaining, reset, retry_after, refusal; floats as strings (Lua numbers become integers).
ACQUIRE = """
local size = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local max_streams = tonumber(ARGV[3])
local ticket = ARGV[4]
local lease = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local counting = max_streams > 0 and ticket ~= ''
if counting then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - lease)
  if redis.call('ZCARD', KEYS[2]) >= max_streams then
    return {0, size, 0, '0', '1', 'streams'}
  end
end
local remaining, reset = 0, 0
if size > 0 then
  local per_second = size / period
  local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
  local tokens = size
  if state[1] then
    tokens = math.min(size, tonumber(state[1]) + (now - tonumber(state[2])) * per_second)
  end
  if tokens < 1 then
    return {0, size, 0, tostring((size - tokens) / per_second),
            tostring((1 - tokens) / per_second), 'rate'}
  end
  tokens = tokens - 1
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil(period * 1000) + 1000)
  remaining = math.floor(tokens)
  reset = (size - tokens) / per_second
end
if counting then
  redis.call('ZADD', KEYS[2], now, ticket)
  redis.call('EXPIRE', KEYS[2], lease)
end
return {1, size, remaining, tostring(reset), '0', ''}
"""


class RedisLimiter:
    def __init__(
        self,
        client: RedisClient,
        *,
        timeout: float,
        fail_open: bool,
        on_down: Callable[[], None] = lambda: None,
    ) -> None:
        self.client = client
        self.timeout = timeout
        self.fail_open = fail_open
        self.on_down = on_down  # counts checks decided without Redis
        self._script = client.redis.register_script(ACQUIRE)

    async def acquire(
        self, identity: str, rate: Rate | None, max_streams: int, stream: str | None
    ) -> Decision:
        if rate is None and not (max_streams and stream):
            return UNLIMITED
        keys = [f"kefu:rl:{{{identity}}}", f"kefu:st:{{{identity}}}"]
        args = [
            rate.requests if rate else 0,
            rate.seconds if rate else 1,
            max_streams,
            stream or "",
            STREAM_LEASE_SECONDS,
        ]
        try:
            reply = await self.client.call(
                "limits", lambda r: self._script(keys=keys, args=args), self.timeout
            )
        except StateUnavailable:
            self.on_down()
            if self.fail_open:
                return UNLIMITED
            raise
        allowed, size, remaining, reset, retry_after, refusal = reply
        refused = refusal.decode() if isinstance(refusal, bytes) else str(refusal)
        return Decision(
            bool(allowed),
            int(size),
            int(remaining),
            float(reset),
            float(retry_after),
            "streams" if refused == "streams" else "rate" if refused == "rate" else None,
        )

    async def close(self) -> None:
        return None  # the client is closed by its owner, the app's state

    async def release(self, identity: str, stream: str) -> None:
        with suppress(StateUnavailable):  # if Redis is down, the stream's lease ends it
            await self.client.call(
                "limits.release", lambda r: r.zrem(f"kefu:st:{{{identity}}}", stream)
            )
