"""Fixtures of the Redis tests: a redis-server of their own per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kefu.shared.client import RedisClient
from tests.shared.support import RedisServer, running_redis


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path / "redis") as server:
        yield server


@pytest.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[RedisClient]:
    client = RedisClient(redis_server.url, pool_size=16, timeout=0.25)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
