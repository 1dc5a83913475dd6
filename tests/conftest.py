"""Shared fixtures: settings in a temp dir, and an in-process app on the FakeEngine."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from kefu.app import create_app
from kefu.engine.fake import FakeEngine
from kefu.knowledge.embedder import StaticEmbedder
from kefu.settings import Settings

ClientFactory = Callable[..., AbstractContextManager[TestClient]]


@pytest.fixture(scope="session")
def static_embedder() -> StaticEmbedder:
    """The real embedder: its table is read-only, so one serves every test."""
    return StaticEmbedder()


@pytest.fixture
def settings_factory(tmp_path: Path) -> Callable[..., Settings]:
    """Fake-engine settings in a temp dir. The fast path is off unless a test turns it on
    (``fast_path=True``): tests of the LLM path must not be answered from the demo KB."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "engine": "fake",
            "data_dir": tmp_path / "data",
            "fast_path": False,
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def fake_engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def client_factory(
    settings_factory: Callable[..., Settings], fake_engine: FakeEngine
) -> ClientFactory:
    """``with client_factory(engine=..., **settings) as client:`` — app started and ready."""

    @contextmanager
    def make(engine: FakeEngine | None = None, **overrides: Any) -> Iterator[TestClient]:
        chosen = engine or fake_engine
        app = create_app(settings_factory(**overrides), engine_factory=lambda _: chosen)
        with TestClient(app) as client:
            wait_ready(client)
            yield client

    return make


@pytest.fixture
def client(client_factory: ClientFactory) -> Iterator[TestClient]:
    with client_factory() as c:
        yield c


def wait_ready(client: TestClient, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while client.get("/ready").status_code != 200:
        if time.monotonic() > deadline:
            raise AssertionError(f"app not ready after {timeout} s: {client.get('/ready').text}")
        time.sleep(0.01)
