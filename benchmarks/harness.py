"""What the benchmarks share: start servers as subprocesses, read SSE, stream a chat completion,
percentiles.

Benchmarks print figures and never pass or fail on a time.
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from kefu.bench.sse import SseEvent, SseParser
from kefu.engine.llamacpp.stock_server import LLAMA_SERVER_WITH_AMX_FIX, without_extra_buffers

if TYPE_CHECKING:
    import llama_cpp


def llama_without_amx(**kwargs: Any) -> llama_cpp.Llama:
    """``llama_cpp.Llama(**kwargs)`` loaded as kefu's engine loads it: without the extra
    (AMX/repack) buffer types, which crash in this VM (DESIGN.md)."""
    import llama_cpp

    with without_extra_buffers():
        llm = llama_cpp.Llama(**kwargs)
    if llm.model_params.use_extra_bufts:
        raise SystemExit("could not turn off use_extra_bufts for the direct model")
    return llm


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def summary(doc: str | None) -> str:
    """A module docstring's first paragraph on one line: its ``--help`` description (the
    first line alone cut sentences off mid-way)."""
    return " ".join((doc or "").split("\n\n")[0].split())


def metric_sum(url: str, name: str) -> float:
    """The sum of a counter's series on a server's /metrics (``name`` may carry labels)."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def interpolated_percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default; q in 0..100), NaNs left
    out; nan for no values."""
    ordered = sorted(v for v in values if not math.isnan(v))
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def wait_until(url: str, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"{url} not ready after {timeout:g} s; server log:\n{tail}")


@contextmanager
def running(
    command: list[str],
    ready_url: str,
    name: str,
    ready_timeout: float = 120.0,
    log: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server subprocess until the block ends; its log goes to ``log`` (default: a
    temp file)."""
    log = log or Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log")[1])
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(ready_url, log, ready_timeout)
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                # What it would have written on the way out (a flush, a log) is lost.
                print(f"{name} did not stop within 15 s of SIGTERM: killed", file=sys.stderr)
                process.kill()
                process.wait()


@contextmanager
def kefu_server(*flags: str, data_dir: Path | None = None) -> Iterator[str]:
    """``kefu serve`` on a free port and ``data_dir`` (default: a fresh one, removed
    after); yields the base URL."""
    with kefu_process(*flags, data_dir=data_dir) as (url, _):
        yield url


@contextmanager
def kefu_process(
    *flags: str,
    data_dir: Path | None = None,
    ready_timeout: float = 120.0,
    launcher: Sequence[str] = ("-m", "kefu"),
    log: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``kefu_server``, and its process (to sample its memory, or to kill it).
    ``launcher``: what runs the ``kefu`` command line (soak.py traces it); ``log``: where
    its output goes (default: a temp file)."""
    port = free_port()
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kefu-bench-")))
        command = [sys.executable, *launcher, "serve", "--port", str(port)]
        command += ["--data-dir", str(data_dir), "--log-level", "warning", *flags]
        url = f"http://127.0.0.1:{port}"
        with running(command, url + "/ready", "kefu", ready_timeout, log) as process:
            yield url, process


@contextmanager
def llama_cpp_server(
    model: Path, *, threads: int, n_ctx: int = 2048, interrupt: bool = False
) -> Iterator[str]:
    """llama-cpp-python's ``python -m llama_cpp.server``; yields the base URL."""
    port = free_port()
    command = [sys.executable, "-c", LLAMA_SERVER_WITH_AMX_FIX, "--model", str(model)]
    command += ["--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads)]
    # interrupt=True is its default: a new request drops the running stream. Queueing
    # them (False) is its best setting for several users, so benchmarks compare that.
    command += ["--n_threads_batch", str(threads), "--interrupt_requests", str(interrupt)]
    url = f"http://127.0.0.1:{port}"
    with running(command, url + "/v1/models", "llama-cpp-server"):
        yield url


@dataclass(frozen=True)
class StreamResult:
    ttft: float  # seconds from sending to the first non-empty content delta
    e2e: float  # seconds from sending to the end of the stream
    text: str
    error: str | None = None


@dataclass(frozen=True)
class ChatTrace:
    """When a streamed chat completion's parts arrived, in time.perf_counter() seconds."""

    sent: float  # the request was sent
    end: float  # the stream ended, or failed
    first: float | None = None  # the first non-empty content delta
    last: float | None = None  # the last non-empty content delta
    text: str = ""
    usage: dict[str, Any] | None = None  # the usage chunk, where the body asked for one
    error: str | None = None


async def sse_events(response: httpx.Response) -> AsyncGenerator[SseEvent, None]:
    """The events of a streamed text/event-stream body, as kefu bench reads them
    (kefu.bench.sse); an event comes out at the blank line that ends it. A caller that
    stops early wraps this in contextlib.aclosing."""
    parser = SseParser()
    async for line in response.aiter_lines():
        if (event := parser.feed(line)) is not None:
            yield event
    if (event := parser.feed("")) is not None:
        yield event  # a last event the server did not end with a blank line


async def trace_chat(client: httpx.AsyncClient, base_url: str, body: dict[str, Any]) -> ChatTrace:
    """POST ``body`` (with stream true) to /v1/chat/completions and time its SSE chunks."""
    sent = time.perf_counter()
    first: float | None = None
    last: float | None = None
    parts: list[str] = []
    usage: dict[str, Any] | None = None
    try:
        async with client.stream("POST", base_url + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                await r.aread()
                return ChatTrace(sent, time.perf_counter(), error=f"HTTP {r.status_code}")
            async with contextlib.aclosing(sse_events(r)) as events:
                async for event in events:
                    if event.data == "[DONE]":
                        continue
                    chunk = json.loads(event.data)
                    if "error" in chunk:
                        return ChatTrace(sent, time.perf_counter(), error=str(chunk["error"]))
                    for choice in chunk.get("choices", []):
                        delta = choice.get("delta") or {}
                        content = delta.get("content")
                        if content or delta.get("tool_calls"):  # a call's fragment is output
                            last = time.perf_counter()
                            first = first or last
                            parts.append(content or "")
                    usage = chunk.get("usage") or usage
    except httpx.HTTPError as exc:
        return ChatTrace(sent, time.perf_counter(), error=type(exc).__name__)
    return ChatTrace(sent, time.perf_counter(), first, last, "".join(parts), usage)


async def stream_chat(
    client: httpx.AsyncClient,
    base_url: str,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    temperature: float = 0.0,
) -> StreamResult:
    body = {
        "model": "bench",
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
    }
    trace = await trace_chat(client, base_url, body)
    if trace.error is not None:
        return StreamResult(0.0, trace.end - trace.sent, "", trace.error)
    return StreamResult((trace.first or trace.end) - trace.sent, trace.end - trace.sent, trace.text)
