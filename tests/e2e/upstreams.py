"""Real OpenAI-compatible upstream engines for the pool's end-to-end tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.stock_server import LLAMA_SERVER_WITH_AMX_FIX
from tests.e2e.support import READY_TIMEOUT_S, ServerStartError, free_port


@contextmanager
def llama_cpp_server(log: Path, *args: str) -> Iterator[str]:
    """``python -m llama_cpp.server`` on the bundled model, one thread, with ``args`` (its own
    flags: ``--chat_format chatml-function-calling``, ``--model_alias NAME``); yields its
    /v1 URL."""
    with llama_cpp_process(log, *args) as (url, _):
        yield url


@contextmanager
def llama_cpp_process(log: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``llama_cpp_server``, and its process (to kill it)."""
    port = free_port()
    command = [sys.executable, "-c", LLAMA_SERVER_WITH_AMX_FIX]
    command += ["--model", str(bundled_model_path()), "--port", str(port), "--n_ctx", "2048"]
    command += ["--n_threads", "1", "--n_threads_batch", "1", "--interrupt_requests", "False"]
    command += args
    url = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:
                try:
                    if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise ServerStartError(f"llama_cpp.server did not start; see {log}")
                time.sleep(0.2)
            yield url + "/v1", process
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
