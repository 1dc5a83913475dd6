"""The ledger's steps are exclusive, in process and in Redis alike: one answer per message,
one delivery of it, a dead owner's work taken over once its lease ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kefu.channels.wechat.inbound import Inbound
from kefu.channels.wechat.ledger import Ledger, LocalLedger
from kefu.channels.wechat.redis_ledger import RedisLedger
from kefu.shared.client import RedisClient
from tests.shared.support import running_redis

pytestmark = pytest.mark.anyio

MESSAGE = Inbound("mp:1", "o-1", "gh", "text", "你好", 1_700_000_000)


@pytest.fixture(params=["local", "redis"])
async def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Ledger]:
    if request.param == "local":
        yield LocalLedger()
        return
    with running_redis(tmp_path / "redis") as server:
        client = RedisClient(server.url, pool_size=8, timeout=1.0)
        try:
            yield RedisLedger(client)
        finally:
            await client.close()


async def test_the_first_request_owns_the_message_and_retries_count(ledger: Ledger) -> None:
    first, created = await ledger.arrive(MESSAGE, "a", 3.0, 1.0)
    again, created_again = await ledger.arrive(MESSAGE, "b", 3.0, 1.0)
    assert created
    assert not created_again
    assert first.state == again.state == "working"
    assert again.owner == "a"
    assert again.attempts == 2
    assert again.message == MESSAGE


async def test_a_ready_answer_is_delivered_once(ledger: Ledger) -> None:
    await ledger.arrive(MESSAGE, "a", 3.0, 5.0)
    assert not await ledger.finish(MESSAGE.key, "b", ["x"])  # not b's
    assert await ledger.finish(MESSAGE.key, "a", ["答案"])
    # A request waits for it: the sender must leave it to that request.
    entry, moved = await ledger.deliver(MESSAGE.key, "sending", "a", 3.0)
    assert not moved
    assert entry is not None
    assert entry.state == "ready"
    assert entry.wanted_left > 4
    outcomes = await asyncio.gather(
        *(ledger.deliver(MESSAGE.key, "passive", "r", 0) for _ in range(5))
    )
    assert sum(moved for _, moved in outcomes) == 1
    entry = await ledger.get(MESSAGE.key)
    assert entry is not None
    assert entry.state == "passive"
    assert entry.parts == ("答案",)


async def test_an_unwanted_answer_is_sent_in_parts(ledger: Ledger) -> None:
    await ledger.arrive(MESSAGE, "a", 3.0, 0.0)
    await ledger.finish(MESSAGE.key, "a", ["one", "two"])
    entry, moved = await ledger.deliver(MESSAGE.key, "sending", "a", 3.0)
    assert moved
    assert entry is not None
    assert entry.state == "sending"
    await ledger.progress(MESSAGE.key, "a", 1, 3.0)
    entry = await ledger.get(MESSAGE.key)
    assert entry is not None
    assert (entry.state, entry.sent) == ("sending", 1)
    await ledger.progress(MESSAGE.key, "a", 2, 3.0)
    entry = await ledger.get(MESSAGE.key)
    assert entry is not None
    assert entry.state == "sent"
    assert await ledger.due() == []


async def test_a_dead_owners_work_is_due_and_taken_over_once(ledger: Ledger) -> None:
    await ledger.arrive(MESSAGE, "dead", 0.2, 0.0)
    assert await ledger.take_over(MESSAGE.key, "b", 3.0) is None  # its lease still runs
    await asyncio.sleep(0.3)
    assert await ledger.due() == [MESSAGE.key]
    taken = await asyncio.gather(*(ledger.take_over(MESSAGE.key, o, 3.0) for o in "bcd"))
    winners = [entry for entry in taken if entry is not None]
    assert len(winners) == 1
    assert winners[0].state == "working"
    assert not await ledger.renew(MESSAGE.key, "dead", 3.0)
    assert not await ledger.finish(MESSAGE.key, "dead", ["late"])
    assert await ledger.due() == []
