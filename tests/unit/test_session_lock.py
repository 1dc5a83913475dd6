"""SessionLocks: one turn per session at a time, bounded waiting, no lingering entries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import pytest

from kefu.errors import RequestError, SessionBusy
from kefu.sessions.locks import SessionLocks

pytestmark = pytest.mark.anyio

HANG_GUARD = 10.0  # only against hangs; nothing asserts speed


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(HANG_GUARD):
        # Polling on purpose: the state watched is internal to the code under test.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0)


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def test_second_holder_waits_for_the_first() -> None:
    locks = SessionLocks(wait_seconds=HANG_GUARD)
    events: list[str] = []

    async def second() -> None:
        async with locks.hold("s"):
            events.append("second in")

    async with locks.hold("s"):
        events.append("first in")
        task = asyncio.create_task(second())
        await settle()
        assert events == ["first in"]  # still waiting
        assert len(locks) == 1
        events.append("first out")
    await task
    assert events == ["first in", "first out", "second in"]
    assert len(locks) == 0


async def test_different_sessions_do_not_block_each_other() -> None:
    locks = SessionLocks(wait_seconds=0.05)
    async with locks.hold("a"), locks.hold("b"):
        assert len(locks) == 2
    assert len(locks) == 0


async def test_session_busy_after_wait_seconds() -> None:
    locks = SessionLocks(wait_seconds=0.05)
    async with locks.hold("s-1"):
        with pytest.raises(SessionBusy) as info:
            async with locks.hold("s-1"):
                pytest.fail("must not enter while the session is held")
        error = info.value
        assert isinstance(error, RequestError)
        assert error.code == "session_busy"
        assert error.param == "session_id"
        assert "s-1" in error.message
        assert "0.05" in error.message
        assert len(locks) == 1  # the holder is still there
    assert len(locks) == 0
    async with locks.hold("s-1"):  # free again
        assert len(locks) == 1


async def test_map_is_empty_after_many_users() -> None:
    locks = SessionLocks(wait_seconds=HANG_GUARD)
    inside: list[int] = []
    max_inside = 0

    async def turn(session: str) -> None:
        nonlocal max_inside
        async with locks.hold(session):
            inside.append(1)
            max_inside = max(max_inside, len(inside))
            await asyncio.sleep(0)
            inside.pop()

    await asyncio.gather(*(turn("same") for _ in range(5)), *(turn(f"s{i}") for i in range(5)))
    assert len(locks) == 0
    assert max_inside >= 1


async def test_one_at_a_time_within_a_session() -> None:
    locks = SessionLocks(wait_seconds=HANG_GUARD)
    active = 0
    overlaps = 0

    async def turn() -> None:
        nonlocal active, overlaps
        async with locks.hold("s"):
            active += 1
            overlaps += active > 1
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            active -= 1

    await asyncio.gather(*(turn() for _ in range(6)))
    assert overlaps == 0
    assert len(locks) == 0


async def test_error_in_body_releases_and_cleans_up() -> None:
    locks = SessionLocks(wait_seconds=0.05)
    with pytest.raises(ValueError, match="boom"):
        async with locks.hold("s"):
            raise ValueError("boom")
    assert len(locks) == 0
    async with locks.hold("s"):
        pass


async def test_cancelled_waiter_leaves_nothing_behind() -> None:
    locks = SessionLocks(wait_seconds=HANG_GUARD)
    entered: list[str] = []

    async def waiter() -> None:
        async with locks.hold("s"):
            entered.append("waiter")

    async with locks.hold("s"):
        task = asyncio.create_task(waiter())
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(locks) == 1
    assert len(locks) == 0
    assert entered == []
    async with locks.hold("s"):  # the lock is not stuck
        assert len(locks) == 1
    assert len(locks) == 0
