"""The access token of a WeChat API: fetched once, cached, refreshed before it expires,
and with --redis shared by every replica, which refresh it once between them.

It matters: fetching a new Official Account token ends the old one's life (after a few
minutes' grace), so replicas that each fetched their own would keep invalidating each
other's. One replica takes a short Redis lease and fetches; the others wait for the
token it stores. A token WeChat calls invalid is dropped (only if it is still the one
stored) and the next call fetches again.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from kefu.errors import StateUnavailable
from kefu.shared.client import RedisClient

# Refreshed this long before it expires (WeChat's tokens live 7200 s; a refresh leaves
# the old one valid for five minutes more, so no request fails in between).
MARGIN_SECONDS = 300.0
LEASE_SECONDS = 10.0
WAIT_POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    expires_at: float  # wall clock
    refresh_at: float  # wall clock: MARGIN_SECONDS (at most half its life) before it expires

    @classmethod
    def lasting(cls, value: str, lifetime: float, now: float) -> Token:
        return cls(value, now + lifetime, now + lifetime - min(MARGIN_SECONDS, lifetime / 2))

    def fresh(self, now: float) -> bool:
        return now < self.refresh_at


# Fetches a new token from WeChat: (the token, seconds it lives).
Fetch = Callable[[], Awaitable[tuple[str, float]]]


class TokenStore(Protocol):
    async def read(self) -> Token | None: ...

    async def write(self, token: Token) -> None: ...

    async def drop(self, value: str) -> None:
        """Forget the stored token if it is still ``value``."""
        ...

    async def lease(self) -> str | None:
        """The right to fetch for everyone, for LEASE_SECONDS; None if another holds it."""
        ...

    async def unlease(self, lease: str) -> None: ...


class LocalTokenStore:
    def __init__(self) -> None:
        self._token: Token | None = None

    async def read(self) -> Token | None:
        return self._token

    async def write(self, token: Token) -> None:
        self._token = token

    async def drop(self, value: str) -> None:
        if self._token is not None and self._token.value == value:
            self._token = None

    async def lease(self) -> str | None:
        return "local"  # the process's own lock already makes it one fetch

    async def unlease(self, lease: str) -> None:
        return None


DROP = """
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw).value == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
UNLEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisTokenStore:
    def __init__(self, client: RedisClient, name: str) -> None:
        self.client = client
        self.key = f"kefu:wechat:token:{name}"
        self.lease_key = f"kefu:wechat:token-lease:{name}"
        self._drop = client.redis.register_script(DROP)
        self._unlease = client.redis.register_script(UNLEASE)

    async def read(self) -> Token | None:
        raw = await self.client.call("wechat.token", lambda r: r.get(self.key))
        if raw is None:
            return None
        data = json.loads(raw)
        return Token(str(data["value"]), float(data["expires_at"]), float(data["refresh_at"]))

    async def write(self, token: Token) -> None:
        payload = json.dumps(
            {"value": token.value, "expires_at": token.expires_at, "refresh_at": token.refresh_at}
        )
        ttl = max(1, int(token.expires_at - time.time()))
        await self.client.call("wechat.token", lambda r: r.set(self.key, payload, ex=ttl))

    async def drop(self, value: str) -> None:
        await self.client.call("wechat.token", lambda r: self._drop(keys=[self.key], args=[value]))

    async def lease(self) -> str | None:
        lease = uuid.uuid4().hex
        taken = await self.client.call(
            "wechat.token",
            lambda r: r.set(self.lease_key, lease, nx=True, px=int(LEASE_SECONDS * 1000)),
        )
        return lease if taken else None

    async def unlease(self, lease: str) -> None:
        await self.client.call(
            "wechat.token", lambda r: self._unlease(keys=[self.lease_key], args=[lease])
        )


class AccessTokens:
    def __init__(
        self,
        fetch: Fetch,
        store: TokenStore,
        on_refresh: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fetch = fetch
        self.store = store
        self.on_refresh = on_refresh
        self.clock = clock
        self._lock = asyncio.Lock()  # one fetch per process; the lease makes it one in all

    async def get(self) -> str:
        token = await self.store.read()
        if token is not None and token.fresh(self.clock()):
            return token.value
        async with self._lock:
            return await self._refresh()

    async def invalid(self, value: str) -> None:
        """WeChat said ``value`` is invalid or expired: the next ``get`` fetches."""
        await self.store.drop(value)

    async def _refresh(self) -> str:
        deadline = time.monotonic() + LEASE_SECONDS
        while True:
            token = await self.store.read()  # another replica, or the last holder, got one
            if token is not None and token.fresh(self.clock()):
                return token.value
            lease = await self.store.lease()
            if lease is not None:
                try:
                    # The lease may come just after another replica wrote the token it
                    # fetched under it: fetching again would end that token's life.
                    token = await self.store.read()
                    if token is not None and token.fresh(self.clock()):
                        return token.value
                    value, lifetime = await self.fetch()
                    await self.store.write(Token.lasting(value, lifetime, self.clock()))
                    self.on_refresh()
                    return value
                finally:
                    await self.store.unlease(lease)
            if time.monotonic() > deadline:
                raise StateUnavailable("no WeChat access token: another replica's fetch hangs")
            await asyncio.sleep(WAIT_POLL_SECONDS)
