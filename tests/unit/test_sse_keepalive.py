"""with_keepalive: a silence becomes None items, errors pass through, closing stops the source."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing

import pytest

from kefu.api.sse import with_keepalive

pytestmark = pytest.mark.anyio


async def slow(events: list[str], gap: float, fail: bool = False) -> AsyncGenerator[str, None]:
    try:
        for text in ("a", "b"):
            await asyncio.sleep(gap)
            yield text
        if fail:
            raise ValueError("broke off")
    finally:
        events.append("closed")


async def test_silences_become_keepalives_between_items() -> None:
    events: list[str] = []
    got = [item async for item in with_keepalive(slow(events, 0.05), every=0.02)]
    assert [g for g in got if g is not None] == ["a", "b"]
    assert got.count(None) >= 2  # at least one wait before each item
    assert events == ["closed"]


async def test_errors_come_through() -> None:
    events: list[str] = []
    received = []

    async def read() -> None:
        async for item in with_keepalive(slow(events, 0.0, fail=True), every=1.0):
            received.append(item)

    with pytest.raises(ValueError, match="broke off"):
        await read()
    assert received == ["a", "b"]


async def test_closing_early_closes_the_source() -> None:
    events: list[str] = []
    async with aclosing(with_keepalive(slow(events, 0.5), every=0.01)) as items:
        assert await anext(items) is None
    assert events == ["closed"]
