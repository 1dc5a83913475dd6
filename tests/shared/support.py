"""A real redis-server for tests: a free port, a temp dir, no persistence; never a system
service. ``kill`` and ``start`` again keep the port, to test Redis going away."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

from tests.e2e.support import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServer:
    def __init__(self, workdir: Path, *, durable: bool = False) -> None:
        self.workdir = workdir
        # durable: every write is on disk before Redis answers (appendfsync always), so
        # a SIGKILL and a start again lose nothing Redis acknowledged.
        self.durable = durable
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self._log = (self.workdir / "redis.log").open("ab")
        self._proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(self.workdir),
                "--save", "",
                "--appendonly", "yes" if self.durable else "no",
                "--appendfsync", "always",
                "--protected-mode", "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL, as a crash: no goodbye to the clients."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


@contextmanager
def running_redis(workdir: Path, *, durable: bool = False) -> Iterator[RedisServer]:
    if not Path(REDIS_SERVER).exists():
        pytest.fail("redis-server is missing: scripts/test installs Debian's redis-server")
    server = RedisServer(workdir, durable=durable)
    server.start()
    try:
        yield server
    finally:
        server.kill()
