"""Fixtures of the bench tests: synthetic records, and a ``kefu serve`` on the FakeEngine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kefu.bench.record import RequestRecord
from tests.e2e.support import running_kefu


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def record(
    sent: float = 0.0,
    first: float | None = None,
    chunks: list[float] | None = None,
    end: float = 1.0,
    *,
    status: str = "ok",
    tokens: int | None = None,
    tier: str | None = "llm",
    turn: int = 1,
    level: int = 0,
    load: float = 1.0,
) -> RequestRecord:
    """A synthetic request; ``chunks`` default to ``[first]`` when ``first`` is given."""
    if chunks is None:
        chunks = [] if first is None else [first]
    values: dict[str, Any] = {
        "level": level,
        "load": load,
        "session": 0,
        "turn": turn,
        "kind": "faq",
        "sent": sent,
        "end": end,
        "first_content": first,
        "chunks": chunks,
        "status": status,
        "tier": tier,
        "completion_tokens": tokens,
    }
    return RequestRecord(**values)


# The FakeEngine's capacity: PARALLEL slots, each reply REPLY_WORDS words TOKEN_DELAY apart,
# so one reply takes 8 x 50 ms = 400 ms: long against HTTP overhead and event-loop jitter
# on a busy 2-core machine, with few events per reply.
PARALLEL = 4
TOKEN_DELAY = 0.05
REPLY_WORDS = 8


@pytest.fixture(scope="session")
def fake_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``kefu serve --engine fake`` with PARALLEL slots as a subprocess; yields its URL."""
    base = tmp_path_factory.mktemp("bench-server")
    flags = ["--engine", "fake", "--parallel", str(PARALLEL), "--log-level", "warning"]
    flags += ["--fake-token-delay", str(TOKEN_DELAY), "--fake-reply-words", str(REPLY_WORDS)]
    # Every message to the engine: the capacity under test is the slots', not the fast path's.
    flags += ["--no-fast-path"]
    with running_kefu(base, *flags) as server:
        yield server.url
