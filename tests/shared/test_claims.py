"""Agents' claims on handed-off conversations, in Redis (two replicas) and in process: one
holder at a time, renewed by its holder, free again when dropped or expired."""

from __future__ import annotations

import asyncio

import pytest

from kefu.sessions.claims import Claims, LocalClaims
from kefu.shared.claims import RedisClaims
from kefu.shared.client import RedisClient

pytestmark = pytest.mark.anyio


async def one_holder_at_a_time(first: Claims, second: Claims) -> None:
    assert await first.take("s1", "mei") == "mei"
    assert await second.take("s1", "li") == "mei"  # the other replica sees mei's claim
    assert await second.take("s1", "mei") == "mei"  # renewed by its holder anywhere
    assert await second.take("s2", "li") == "li"
    assert await first.holders(["s1", "s2", "s3"]) == {"s1": "mei", "s2": "li"}
    await second.drop("s1")
    assert await first.take("s1", "li") == "li"
    assert await first.holders([]) == {}


async def test_redis_claims_are_shared_by_replicas(redis_client: RedisClient) -> None:
    await one_holder_at_a_time(RedisClaims(redis_client), RedisClaims(redis_client))


async def test_a_redis_claim_expires(redis_client: RedisClient) -> None:
    claims = RedisClaims(redis_client, seconds=0.2)
    assert await claims.take("s1", "mei") == "mei"
    await asyncio.sleep(0.3)
    assert await claims.take("s1", "li") == "li"


async def test_local_claims_behave_the_same() -> None:
    local = LocalClaims()
    await one_holder_at_a_time(local, local)
    short = LocalClaims(seconds=0.05)
    assert await short.take("s1", "mei") == "mei"
    await asyncio.sleep(0.1)
    assert await short.holders(["s1"]) == {}
    assert await short.take("s1", "li") == "li"
