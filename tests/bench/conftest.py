"""Fixtures of the bench tests: synthetic records, and a ``kefu serve`` on the FakeEngine."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kefu.bench.record import RequestRecord


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    port = free_port()
    command = [sys.executable, "-m", "kefu", "serve", "--engine", "fake"]
    command += ["--parallel", str(PARALLEL), "--fake-token-delay", str(TOKEN_DELAY)]
    command += ["--fake-reply-words", str(REPLY_WORDS), "--port", str(port)]
    command += ["--data-dir", str(base / "data"), "--log-level", "warning"]
    log = base / "kefu.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEFU_")}
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"kefu exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + "/ready", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"kefu not ready after 30 s:\n{log.read_text()}")
