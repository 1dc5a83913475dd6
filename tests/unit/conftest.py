"""Fixtures for the unit tests: async tests run on asyncio through anyio's pytest plugin."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
