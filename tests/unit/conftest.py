"""Fixtures for the unit tests: async tests run on asyncio through anyio's pytest plugin."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from kefu.service.fast_path import FastPath
from kefu.settings import Settings
from tests.unit.fast_path_support import opened


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def fast_path(settings_factory: Callable[..., Settings]) -> AsyncIterator[FastPath]:
    """The fast path on real parts without e5's second look: what the first look and the
    rules do with a message."""
    fast_path = await opened(settings_factory(fast_path=True), second_look=False)
    try:
        yield fast_path
    finally:
        await fast_path.close()
