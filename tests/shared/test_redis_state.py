"""The Redis backends against a real redis-server: the session store, limits (exact under
concurrency), the cross-replica lock, live events, and a Redis that is gone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kefu.errors import SessionBusy, StateUnavailable
from kefu.limits.rate import Rate
from kefu.sessions.events import SessionEvent
from kefu.shared.client import RedisClient
from kefu.shared.events import RedisSessionEvents
from kefu.shared.limits import RedisLimiter
from kefu.shared.locks import RedisSessionLocks
from kefu.shared.sessions import RedisSessionStore
from kefu.store.base import SessionStore, Turn
from tests.shared.support import RedisServer, running_redis

pytestmark = pytest.mark.anyio


async def test_is_a_session_store(redis_client: RedisClient) -> None:
    store: SessionStore = RedisSessionStore(redis_client, ttl=60)
    assert store is not None


async def test_turns_messages_and_ownership(redis_client: RedisClient) -> None:
    store = RedisSessionStore(redis_client, ttl=60)
    assert await store.get_session("s1") is None
    assert await store.resume("s1", 3) == (None, [])
    for i in range(1, 5):
        number = await store.append_turn(
            "s1", Turn(f"q{i}", f"a{i}", meta={"sources": [], "i": i}), "u1", owner="key:abc"
        )
        assert number == i
    session, recent = await store.resume("s1", 2)
    assert session is not None
    assert (session.user_id, session.owner, session.state) == ("u1", "key:abc", "bot")
    assert [(m.turn, m.role, m.content) for m in recent] == [
        (3, "user", "q3"),
        (3, "assistant", "a3"),
        (4, "user", "q4"),
        (4, "assistant", "a4"),
    ]
    everything = await store.messages("s1")
    assert len(everything) == 8
    assert everything[1].meta == {"sources": [], "i": 1}  # an empty list stays a list
    ttl = await redis_client.redis.ttl("kefu:session:s1")
    assert 0 < ttl <= 60


async def test_handoff_queue_agent_message_and_delete(redis_client: RedisClient) -> None:
    store = RedisSessionStore(redis_client, ttl=60)
    await store.append_turn("a", Turn("human please", "connecting", state="handoff"))
    await store.append_turn("b", Turn("hi", "hello"))
    waiting = await store.sessions_in_state("handoff")
    assert [s.id for s in waiting] == ["a"]
    assert waiting[0].state_since is not None
    message = await store.append_message("a", "Mei here", {"tier": "agent"})
    assert message is not None
    assert message.turn == 1
    assert await store.append_message("nobody", "x", {}) is None
    released = await store.set_state("a", "bot")
    assert released is not None
    assert released.state == "bot"
    assert await store.sessions_in_state("handoff") == []
    assert await store.delete_session("a")
    assert not await store.delete_session("a")
    assert await store.get_session("a") is None


async def test_one_limit_for_many_concurrent_checks(redis_client: RedisClient) -> None:
    """Two limiters (two replicas) on one Redis, 30 checks at once: exactly 10 pass."""
    replicas = [RedisLimiter(redis_client, timeout=1.0, fail_open=False) for _ in range(2)]
    rate = Rate(10, 60)
    decisions = await asyncio.gather(
        *(replicas[i % 2].acquire("key:k", rate, 0, None) for i in range(30))
    )
    passed = [d for d in decisions if d.allowed]
    assert len(passed) == 10
    refused = [d for d in decisions if not d.allowed]
    assert {d.refusal for d in refused} == {"rate"}
    assert all(5 < d.retry_after <= 6.1 for d in refused)  # one token per 6 s
    assert sorted(d.remaining for d in passed) == list(range(10))


async def test_stream_cap_is_shared_and_given_back(redis_client: RedisClient) -> None:
    limiter = RedisLimiter(redis_client, timeout=1.0, fail_open=False)
    first = await limiter.acquire("key:k", None, 2, "t1")
    second = await limiter.acquire("key:k", None, 2, "t2")
    third = await limiter.acquire("key:k", None, 2, "t3")
    assert (first.allowed, second.allowed, third.allowed) == (True, True, False)
    assert third.refusal == "streams"
    await limiter.release("key:k", "t1")
    assert (await limiter.acquire("key:k", None, 2, "t3")).allowed


async def test_lock_serialises_two_replicas(redis_client: RedisClient) -> None:
    a, b = RedisSessionLocks(2.0, redis_client), RedisSessionLocks(2.0, redis_client)
    order: list[str] = []

    async def turn(locks: RedisSessionLocks, name: str) -> None:
        async with locks.hold("s"):
            order.append(f"{name} in")
            await asyncio.sleep(0.1)
            order.append(f"{name} out")

    await asyncio.gather(turn(a, "a"), turn(b, "b"))
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])


async def test_lock_busy_after_the_wait(redis_client: RedisClient) -> None:
    a, b = RedisSessionLocks(0.2, redis_client), RedisSessionLocks(0.2, redis_client)
    async with a.hold("s"):
        started = time.monotonic()
        with pytest.raises(SessionBusy):
            async with b.hold("s"):
                pass
        assert 0.15 < time.monotonic() - started < 1.0


async def test_event_published_on_one_replica_reaches_the_other(
    redis_server: RedisServer,
) -> None:
    clients = [RedisClient(redis_server.url, pool_size=4, timeout=0.25) for _ in range(2)]
    a, b = RedisSessionEvents(clients[0]), RedisSessionEvents(clients[1])
    try:
        async with b.subscribe("s") as queue:
            await asyncio.sleep(0.05)  # the SUBSCRIBE reaches Redis
            receivers = await a.publish("s", SessionEvent("agent", {"text": "hello"}))
            assert receivers == 1
            async with asyncio.timeout(2):
                event = await queue.get()
        assert event == SessionEvent("agent", {"text": "hello"})
    finally:
        for hub in (a, b):
            await hub.close()
        for client in clients:
            await client.close()


async def test_redis_gone_fails_fast_and_recovers(redis_server: RedisServer) -> None:
    client = RedisClient(redis_server.url, pool_size=4, timeout=0.25)
    store = RedisSessionStore(client, ttl=60)
    closed = RedisLimiter(client, timeout=0.05, fail_open=False)
    downs: list[int] = []
    opened = RedisLimiter(client, timeout=0.05, fail_open=True, on_down=lambda: downs.append(1))
    try:
        await store.append_turn("s", Turn("q", "a"))
        redis_server.kill()
        started = time.monotonic()
        with pytest.raises(StateUnavailable):
            await store.resume("s", 3)
        with pytest.raises(StateUnavailable):
            await closed.acquire("key:k", Rate(5, 60), 0, None)
        assert (await opened.acquire("key:k", Rate(5, 60), 0, None)).allowed
        assert downs == [1]
        assert time.monotonic() - started < 1.5
        redis_server.start()  # empty: it kept nothing on disk
        assert await client.ping()
        assert await store.get_session("s") is None
        assert (await closed.acquire("key:k", Rate(5, 60), 0, None)).remaining == 4
    finally:
        await client.close()


async def test_live_events_resume_after_redis_restarts(redis_server: RedisServer) -> None:
    clients = [RedisClient(redis_server.url, pool_size=4, timeout=0.25) for _ in range(2)]
    a, b = RedisSessionEvents(clients[0]), RedisSessionEvents(clients[1])
    try:
        async with b.subscribe("s") as queue:
            redis_server.kill()
            await asyncio.sleep(0.3)
            redis_server.start()
            for _ in range(25):  # until the listener has subscribed again (5 s at most)
                if await a.publish("s", SessionEvent("agent", {"text": "back"})):
                    break
                await asyncio.sleep(0.2)
            async with asyncio.timeout(5):
                event = await queue.get()
        assert event.data == {"text": "back"}
    finally:
        for hub in (a, b):
            await hub.close()
        for client in clients:
            await client.close()


async def test_a_lease_left_by_an_outage_is_released_by_the_next_turn(tmp_path: Path) -> None:
    with running_redis(tmp_path / "durable", durable=True) as redis:
        client = RedisClient(redis.url, pool_size=4, timeout=0.25)
        locks = RedisSessionLocks(0.5, client)
        try:
            async with locks.hold("s"):
                redis.kill()  # the release at the end fails: the lease stays in Redis
            redis.start()  # with what it acknowledged, the lease among it
            assert await client.redis.exists("kefu:lock:s")
            started = time.monotonic()
            async with locks.hold("s"):  # not a 409 after waiting out the lease
                pass
            assert time.monotonic() - started < 0.4
        finally:
            await client.close()
