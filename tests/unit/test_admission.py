"""Admission: slots, a bounded line, timeouts, first-come first-served, no leaked slots."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import anyio
import pytest

from kefu.errors import QueueFull, QueueTimeout, Unavailable
from kefu.limits.admission import Admission

pytestmark = pytest.mark.anyio

# Only a guard against hangs; no test asserts how fast anything is.
HANG_GUARD = 10.0


async def until(condition: Callable[[], bool]) -> None:
    """Let other tasks run until ``condition`` holds."""
    with anyio.fail_after(HANG_GUARD):
        # Polling on purpose: the state watched is internal to the code under test.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0)


def waiter_task(admission: Admission, entered: list[str], name: str) -> asyncio.Task[None]:
    async def run() -> None:
        async with admission.slot():
            entered.append(name)
            await asyncio.sleep(0)

    return asyncio.create_task(run(), name=name)


async def test_immediate_slots_when_free() -> None:
    admission = Admission(slots=2, max_waiting=0, timeout=HANG_GUARD)
    assert admission.running == 0
    async with admission.slot():
        assert admission.running == 1
        async with admission.slot():
            assert admission.running == 2
            assert admission.waiting == 0
        assert admission.running == 1
    assert admission.running == 0


async def test_slot_released_when_body_raises() -> None:
    admission = Admission(slots=1, max_waiting=0, timeout=HANG_GUARD)
    with pytest.raises(KeyError):
        async with admission.slot():
            raise KeyError("boom")
    assert admission.running == 0
    async with admission.slot():
        assert admission.running == 1


async def test_queue_full_when_no_waiting_allowed() -> None:
    admission = Admission(slots=1, max_waiting=0, timeout=HANG_GUARD)
    async with admission.slot():
        with pytest.raises(QueueFull) as info:
            async with admission.slot():
                pytest.fail("must not be admitted")
    assert isinstance(info.value, Unavailable)
    assert info.value.code == "queue_full"
    assert info.value.retry_after > 0
    assert admission.running == 0


async def test_queue_full_at_once_when_line_is_full() -> None:
    # A long timeout: if the third request queued instead of failing, it would hang, not raise.
    admission = Admission(slots=1, max_waiting=2, timeout=HANG_GUARD)
    entered: list[str] = []
    async with admission.slot():
        tasks = [waiter_task(admission, entered, name) for name in ("b", "c")]
        await until(lambda: admission.waiting == 2)
        with anyio.fail_after(HANG_GUARD), pytest.raises(QueueFull) as info:
            async with admission.slot():
                pytest.fail("must not be admitted")
        assert info.value.retry_after > 0
        assert "1 running" in info.value.message
        assert "2 waiting" in info.value.message
        assert admission.waiting == 2
    await asyncio.gather(*tasks)
    assert entered == ["b", "c"]
    assert admission.running == 0
    assert admission.waiting == 0


async def test_queue_timeout() -> None:
    admission = Admission(slots=1, max_waiting=4, timeout=0.05)
    async with admission.slot():
        with pytest.raises(QueueTimeout) as info:
            async with admission.slot():
                pytest.fail("must not be admitted")
        assert info.value.code == "queue_timeout"
        assert info.value.retry_after > 0
        assert "0.05" in info.value.message
        assert admission.waiting == 0
        assert admission.running == 1
    assert admission.running == 0
    # The timed-out waiter left nothing behind: the next request gets the slot at once.
    async with admission.slot():
        assert admission.running == 1


async def test_fifo_hand_over() -> None:
    admission = Admission(slots=1, max_waiting=8, timeout=HANG_GUARD)
    entered: list[str] = []
    tasks: list[asyncio.Task[None]] = []
    async with admission.slot():
        for name in ["b", "c", "d", "e"]:
            tasks.append(waiter_task(admission, entered, name))
            await until(lambda: admission.waiting == len(tasks))
    await asyncio.gather(*tasks)
    assert entered == ["b", "c", "d", "e"]
    assert admission.running == 0


async def test_released_slot_passes_straight_to_the_waiter() -> None:
    admission = Admission(slots=1, max_waiting=2, timeout=HANG_GUARD)
    entered: list[str] = []
    first = admission.slot()
    await first.__aenter__()
    b = waiter_task(admission, entered, "b")
    await until(lambda: admission.waiting == 1)
    await first.__aexit__(None, None, None)
    # Handed over, not freed: a newcomer cannot jump the line.
    assert admission.running == 1
    assert admission.waiting == 0
    c = waiter_task(admission, entered, "c")
    await asyncio.gather(b, c)
    assert entered == ["b", "c"]
    assert admission.running == 0


async def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    admission = Admission(slots=1, max_waiting=2, timeout=HANG_GUARD)
    entered: list[str] = []
    async with admission.slot():
        b = waiter_task(admission, entered, "b")
        await until(lambda: admission.waiting == 1)
        b.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b
        assert admission.waiting == 0
        assert admission.running == 1
    assert admission.running == 0
    assert entered == []
    for _ in range(3):  # the slot is free again, every time
        async with admission.slot():
            assert admission.running == 1
    assert admission.running == 0


async def test_waiter_cancelled_as_the_slot_is_handed_over_does_not_leak() -> None:
    admission = Admission(slots=1, max_waiting=2, timeout=HANG_GUARD)
    entered: list[str] = []
    first = admission.slot()
    await first.__aenter__()
    b = waiter_task(admission, entered, "b")
    await until(lambda: admission.waiting == 1)
    await first.__aexit__(None, None, None)  # hands the slot to b ...
    b.cancel()  # ... which is cancelled before it could run
    with contextlib.suppress(asyncio.CancelledError):
        await b
    # Whether b ran its body or gave the slot back, nothing stays taken.
    assert admission.running == 0
    assert admission.waiting == 0
    c = waiter_task(admission, entered, "c")
    await c
    assert entered[-1] == "c"
    assert admission.running == 0


async def test_waiter_cancelled_just_before_the_hand_over_gives_the_slot_back() -> None:
    admission = Admission(slots=1, max_waiting=2, timeout=HANG_GUARD)
    entered: list[str] = []
    first = admission.slot()
    await first.__aenter__()
    b = waiter_task(admission, entered, "b")
    await until(lambda: admission.waiting == 1)
    b.cancel()  # cancelled while still in line ...
    await first.__aexit__(None, None, None)  # ... and handed the slot before it could run
    with pytest.raises(asyncio.CancelledError):
        await b
    assert entered == []
    assert admission.running == 0
    assert admission.waiting == 0
    c = waiter_task(admission, entered, "c")
    await c
    assert entered == ["c"]
    assert admission.running == 0


async def test_cancellation_at_the_hand_over_is_not_swallowed() -> None:
    admission = Admission(slots=1, max_waiting=2, timeout=HANG_GUARD)
    entered: list[str] = []
    first = admission.slot()
    await first.__aenter__()
    b = waiter_task(admission, entered, "b")
    await until(lambda: admission.waiting == 1)
    await first.__aexit__(None, None, None)  # hands the slot to b ...
    b.cancel()  # ... which is cancelled before it could run
    with pytest.raises(asyncio.CancelledError):
        await b
    assert entered == []
    assert admission.running == 0


async def test_cancelled_waiter_keeps_later_waiters_in_line() -> None:
    admission = Admission(slots=1, max_waiting=3, timeout=HANG_GUARD)
    entered: list[str] = []
    async with admission.slot():
        b = waiter_task(admission, entered, "b")
        await until(lambda: admission.waiting == 1)
        c = waiter_task(admission, entered, "c")
        await until(lambda: admission.waiting == 2)
        b.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b
        assert admission.waiting == 1
    await c
    assert entered == ["c"]
    assert admission.running == 0
