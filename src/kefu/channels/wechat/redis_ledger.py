"""The ledger in Redis (--redis): every replica sees one entry per message.

An entry is a JSON string moved by one Lua script per step, on Redis's own clock
(``TIME``), so leases mean the same on every replica whatever their clocks say. A sorted
set holds each unfinished entry's next deadline (a lease's end, a passive wait's end): the
sweeper's ``due``. Waiting for a change polls: a request waits a few seconds at most.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from kefu.channels.wechat.inbound import Inbound
from kefu.channels.wechat.ledger import KEEP_SECONDS, Entry
from kefu.shared.client import RedisClient

PREFIX = "kefu:wechat:msg:"
DUE = "kefu:wechat:due"
POLL_SECONDS = 0.05

# Shared by the scripts: now in ms, and how an entry is written back with its deadline.
HEAD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function save(e)
  redis.call('SET', KEYS[1], cjson.encode(e), 'KEEPTTL')
  if e.s == 'working' or e.s == 'sending' then
    redis.call('ZADD', KEYS[2], e.l, KEYS[1])
  elseif e.s == 'ready' then
    redis.call('ZADD', KEYS[2], e.w, KEYS[1])
  else
    redis.call('ZREM', KEYS[2], KEYS[1])
  end
end
local function out(e, moved)
  e.t = now
  return {cjson.encode(e), moved}
end
"""
ARRIVE = (
    HEAD
    + """
local raw = redis.call('GET', KEYS[1])
local want = now + tonumber(ARGV[4])
if not raw then
  local e = {s='working', o=ARGV[2], m=cjson.decode(ARGV[1]), l=now + tonumber(ARGV[3]),
             w=want, r=now, a=1, n=0, p={}}
  redis.call('SET', KEYS[1], cjson.encode(e), 'PX', ARGV[5])
  save(e)
  return out(e, 1)
end
local e = cjson.decode(raw)
e.a = e.a + 1
if want > e.w then e.w = want end
save(e)
return out(e, 0)
"""
)
GET = (
    HEAD
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return {false, 0} end
return out(cjson.decode(raw), 0)
"""
)
TAKE_OVER = (
    HEAD
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then redis.call('ZREM', KEYS[2], KEYS[1]) return {false, 0} end
local e = cjson.decode(raw)
if (e.s == 'working' or e.s == 'sending') and e.l <= now then
  e.o = ARGV[1]
  e.l = now + tonumber(ARGV[2])
elseif e.s == 'ready' and e.w <= now then
  e.s = 'sending'
  e.o = ARGV[1]
  e.l = now + tonumber(ARGV[2])
else
  return {false, 0}
end
save(e)
return out(e, 1)
"""
)
RENEW = (
    HEAD
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return {false, 0} end
local e = cjson.decode(raw)
if e.o ~= ARGV[1] or (e.s ~= 'working' and e.s ~= 'sending') then return {false, 0} end
e.l = now + tonumber(ARGV[2])
save(e)
return out(e, 1)
"""
)
FINISH = (
    HEAD
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return {false, 0} end
local e = cjson.decode(raw)
if e.s ~= 'working' or e.o ~= ARGV[1] then return {false, 0} end
e.s = 'ready'
e.p = cjson.decode(ARGV[2])
save(e)
return out(e, 1)
"""
)
DELIVER = (
    HEAD
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return {false, 0} end
local e = cjson.decode(raw)
if e.s ~= 'ready' or (ARGV[1] == 'sending' and e.w > now) then return out(e, 0) end
e.s = ARGV[1]
if ARGV[1] == 'sending' then
  e.o = ARGV[2]
  e.l = now + tonumber(ARGV[3])
end
save(e)
return out(e, 1)
"""
)
PROGRESS = (
    HEAD
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return {false, 0} end
local e = cjson.decode(raw)
if e.s ~= 'sending' or e.o ~= ARGV[1] then return {false, 0} end
e.n = tonumber(ARGV[2])
e.l = now + tonumber(ARGV[3])
if ARGV[4] == '1' then
  e.s = 'failed'
elseif e.n >= #e.p then
  e.s = 'sent'
end
save(e)
return out(e, 1)
"""
)
DUE_KEYS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
"""


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


class RedisLedger:
    def __init__(self, client: RedisClient) -> None:
        self.client = client
        redis = client.redis
        self._arrive = redis.register_script(ARRIVE)
        self._get = redis.register_script(GET)
        self._take_over = redis.register_script(TAKE_OVER)
        self._renew = redis.register_script(RENEW)
        self._finish = redis.register_script(FINISH)
        self._deliver = redis.register_script(DELIVER)
        self._progress = redis.register_script(PROGRESS)
        self._due = redis.register_script(DUE_KEYS)

    async def _run(self, op: str, script: Any, key: str, *args: Any) -> tuple[Entry | None, bool]:
        keys = [PREFIX + key, DUE]
        raw, moved = await self.client.call(
            f"wechat.{op}", lambda r: script(keys=keys, args=list(args))
        )
        entry = Entry.from_wire(json.loads(raw)) if raw else None
        return entry, bool(moved)

    async def arrive(
        self, message: Inbound, owner: str, lease: float, want: float
    ) -> tuple[Entry, bool]:
        payload = json.dumps(message.as_dict(), ensure_ascii=False)
        entry, created = await self._run(
            "arrive", self._arrive, message.key, payload, owner, _ms(lease), _ms(want),
            _ms(KEEP_SECONDS),
        )  # fmt: skip
        assert entry is not None
        return entry, created

    async def get(self, key: str) -> Entry | None:
        return (await self._run("get", self._get, key))[0]

    async def take_over(self, key: str, owner: str, lease: float) -> Entry | None:
        entry, moved = await self._run("take_over", self._take_over, key, owner, _ms(lease))
        return entry if moved else None

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        return (await self._run("renew", self._renew, key, owner, _ms(lease)))[1]

    async def finish(self, key: str, owner: str, parts: list[str]) -> bool:
        payload = json.dumps(parts, ensure_ascii=False)
        return (await self._run("finish", self._finish, key, owner, payload))[1]

    async def deliver(
        self, key: str, how: Literal["passive", "sending"], owner: str, lease: float
    ) -> tuple[Entry | None, bool]:
        return await self._run("deliver", self._deliver, key, how, owner, _ms(lease))

    async def progress(
        self, key: str, owner: str, sent: int, lease: float, failed: bool = False
    ) -> None:
        await self._run(
            "progress", self._progress, key, owner, sent, _ms(lease), "1" if failed else "0"
        )

    async def due(self, limit: int = 100) -> list[str]:
        keys = await self.client.call("wechat.due", lambda r: self._due(keys=[DUE], args=[limit]))
        return [(k.decode() if isinstance(k, bytes) else str(k)).removeprefix(PREFIX) for k in keys]

    async def changed(self, key: str, within: float) -> None:
        await asyncio.sleep(max(0.0, min(within, POLL_SECONDS)))

    async def close(self) -> None:
        return None
