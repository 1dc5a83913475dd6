"""Fixtures of the HTTP tests (the shared ones live in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from kefu.engine.fake import FakeEngine
from kefu.settings import Settings
from tests.conftest import wait_ready
from tests.http.helpers import make_app


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def shared_engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture(scope="module")
def shared_client(
    tmp_path_factory: pytest.TempPathFactory, shared_engine: FakeEngine
) -> Iterator[TestClient]:
    """One started app per module, for requests that change nothing (errors, probes)."""
    values: dict[str, Any] = {
        "engine": "fake",
        "data_dir": tmp_path_factory.mktemp("shared"),
        "fast_path": False,
    }
    settings = Settings(**values)
    with TestClient(make_app(settings, shared_engine)) as client:
        wait_ready(client)
        yield client
