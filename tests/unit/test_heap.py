"""heap: glibc's arenas capped (mallopt), their free pages given back (malloc_trim)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kefu import heap


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(heap._TRIM is None, reason="this C library has no malloc_trim")
def test_trim_gives_freed_memory_back() -> None:
    heap.trim()
    # 64 MB in blocks of 4 KB (malloc's, not Python's small-object arenas); the last one
    # stays alive, so the heap's top cannot shrink and free() alone returns nothing.
    blocks = [bytes(4096) for _ in range(16_384)]
    pinned = bytes(4096)
    del blocks
    before = rss_kib()
    assert heap.trim()
    after = rss_kib()
    assert before - after > 32_000, (before, after)
    assert pinned  # alive until here


def test_without_malloc_trim_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_TRIM", None)
    assert not heap.trim()


def test_the_lifespan_task_trims_on_its_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_TRIM", lambda pad: 1)

    async def three_rounds() -> int:
        calls = 0
        third = asyncio.Event()

        def counted() -> bool:
            nonlocal calls
            calls += 1
            if calls == 3:
                loop.call_soon_threadsafe(third.set)
            return True

        loop = asyncio.get_running_loop()
        monkeypatch.setattr(heap, "trim", counted)
        task = asyncio.create_task(heap.trim_every(0.01))
        await third.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return calls

    assert asyncio.run(asyncio.wait_for(three_rounds(), 10)) >= 3


# Four threads allocate (blocks under the mmap threshold come from an arena), then glibc
# lists its arenas on stderr.
ARENAS_USED = """
import ctypes, sys, threading
from kefu import heap
if sys.argv[1] == "capped":
    assert heap.cap_arenas(1)
def work():
    blocks = [bytes(100_000) for _ in range(8)]
threads = [threading.Thread(target=work) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()
"""


def arenas_used(mode: str, **env: str) -> int:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run(
        [sys.executable, "-c", ARENAS_USED, mode],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
        timeout=60,
    )
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.mark.skipif(heap._MALLOPT is None, reason="this C library has no mallopt")
def test_threads_share_the_capped_arenas() -> None:
    assert arenas_used("free") > 1  # glibc's default: a new thread takes a new arena
    assert arenas_used("capped") == 1


def test_an_operators_malloc_arena_max_is_left_to_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert not heap.cap_arenas()
    monkeypatch.setattr(heap, "_MALLOPT", None)
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert not heap.cap_arenas()
