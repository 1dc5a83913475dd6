"""A session's memory (issue 21) in both stores: kept with the session, gone with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kefu.shared.client import RedisClient
from kefu.shared.sessions import RedisSessionStore
from kefu.store.base import SessionMemory, SessionStore, Turn
from kefu.store.sqlite import SqliteSessionStore

pytestmark = pytest.mark.anyio

MEMORY = SessionMemory(
    summary="The customer's kettle LH-100234 leaks; a replacement was offered.",
    facts={"order_numbers": ["LH-100234"], "sizes": ["M"], "language": ["en"]},
    covered_turn=4,
    updated_at=1_700_000_000.5,
)


async def lifecycle(store: SessionStore) -> None:
    assert not await store.save_memory("s", MEMORY)  # no session: nothing is written
    assert await store.load_memory("s") is None
    await store.append_turn("s", Turn("my kettle leaks", "sorry to hear that"))
    assert await store.load_memory("s") is None
    assert await store.save_memory("s", MEMORY)
    assert await store.load_memory("s") == MEMORY
    newer = SessionMemory("shorter", {"language": ["zh"]}, 7, 1_700_000_100.0)
    assert await store.save_memory("s", newer)
    assert await store.load_memory("s") == newer
    assert await store.delete_session("s")
    assert await store.load_memory("s") is None
    # A summary that finishes after the delete leaves nothing behind.
    assert not await store.save_memory("s", MEMORY)
    assert await store.load_memory("s") is None


async def test_sqlite_keeps_and_deletes_the_memory(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "sessions.db")
    await store.open()
    try:
        await lifecycle(store)
    finally:
        await store.close()


async def test_redis_keeps_and_deletes_the_memory(redis_client: RedisClient) -> None:
    await lifecycle(RedisSessionStore(redis_client, ttl=60))
