"""The access token: fetched once for every replica (a Redis lease), refreshed before it
expires, fetched again when WeChat calls it invalid."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kefu.channels.wechat.tokens import AccessTokens, LocalTokenStore, RedisTokenStore, Token
from kefu.shared.client import RedisClient
from tests.shared.support import running_redis

pytestmark = pytest.mark.anyio


class Counting:
    def __init__(self, lifetime: float = 7200.0) -> None:
        self.calls = 0
        self.lifetime = lifetime

    async def __call__(self) -> tuple[str, float]:
        self.calls += 1
        await asyncio.sleep(0.1)  # WeChat's answer takes a while: the others must wait
        return f"token-{self.calls}", self.lifetime


async def test_replicas_on_one_redis_fetch_the_token_once(tmp_path: Path) -> None:
    fetch = Counting()
    with running_redis(tmp_path / "redis") as server:
        clients = [RedisClient(server.url, pool_size=8, timeout=1.0) for _ in range(4)]
        try:
            replicas = [AccessTokens(fetch, RedisTokenStore(c, "mp:app")) for c in clients]
            tokens = await asyncio.gather(*(r.get() for r in replicas for _ in range(5)))
        finally:
            for client in clients:
                await client.close()
    assert set(tokens) == {"token-1"}
    assert fetch.calls == 1


class LateLeaseStore(LocalTokenStore):
    """A store whose lease comes just after another replica wrote its token and gave the
    lease back: this replica read no token before asking for it."""

    async def lease(self) -> str | None:
        await self.write(Token.lasting("token-of-another-replica", 7200.0, time.time()))
        return await super().lease()


async def test_a_lease_taken_after_another_replica_wrote_its_token_fetches_nothing() -> None:
    fetch = Counting()
    tokens = AccessTokens(fetch, LateLeaseStore())
    assert await tokens.get() == "token-of-another-replica"
    assert fetch.calls == 0  # a second fetch would end the other replica's token


async def test_a_token_is_refreshed_before_it_expires_and_after_it_is_refused() -> None:
    now = [1000.0]
    fetch = Counting(lifetime=7200.0)
    tokens = AccessTokens(fetch, LocalTokenStore(), clock=lambda: now[0])
    assert await tokens.get() == "token-1"
    now[0] += 7200 - 301  # more than the margin left: still good
    assert await tokens.get() == "token-1"
    now[0] += 2  # within five minutes of its end: a new one
    assert await tokens.get() == "token-2"
    await tokens.invalid("token-1")  # an old value: the stored one stays
    assert await tokens.get() == "token-2"
    await tokens.invalid("token-2")
    assert await tokens.get() == "token-3"
    assert fetch.calls == 3


async def test_a_short_lived_token_is_refreshed_at_half_its_life() -> None:
    now = [0.0]
    fetch = Counting(lifetime=60.0)
    tokens = AccessTokens(fetch, LocalTokenStore(), clock=lambda: now[0])
    await tokens.get()
    now[0] = 29.0
    assert await tokens.get() == "token-1"
    now[0] = 31.0
    assert await tokens.get() == "token-2"
