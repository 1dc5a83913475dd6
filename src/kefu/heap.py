"""The C heap: fewer glibc arenas, and their free memory given back to the system.

Bursts of allocation (a knowledge-base import and the calibration refit after it,
prompts tokenized on worker threads, numpy temporaries) are freed, but glibc keeps
most freed memory inside its arenas, spread over pages still holding a live block,
so it never returns on its own. Under `benchmarks/soak.py` that was most of the RSS a
server gained after warm-up (15 MB in its first 7 minutes, given back by one
``malloc_trim``, while Python's own objects grew by under 3 MB). A trim every minute
keeps RSS to what is in use.

What a trim cannot give back is the free space between live blocks, and glibc gives
every thread that allocates an arena of its own (up to eight per core): the server's
~17 threads (the engine, the second look, the store, asyncio's workers) each fragment
one. After the trim, a 40-minute soak still grew ~1 MB per 10 minutes, in the thread
arenas' mappings while the main heap stayed flat; ``cap_arenas`` lets the threads
share ``ARENAS`` of them (the same as setting ``MALLOC_ARENA_MAX``, which, when set,
is left to decide). Where the C library has neither call (musl, macOS) this does
nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger("kefu")

TRIM_EVERY = 60.0  # seconds; one trim takes milliseconds, on a worker thread
ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter, from glibc's malloc.h


def _libc(name: str, argtypes: list[Any]) -> Callable[..., int] | None:
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), name)  # CDLL: a call releases the GIL
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


_TRIM = _libc("malloc_trim", [ctypes.c_size_t])
_MALLOPT = _libc("mallopt", [ctypes.c_int, ctypes.c_int])


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Let the threads created from now on share at most ``arenas`` malloc arenas;
    False where that is not possible, or ``MALLOC_ARENA_MAX`` already says how many."""
    if _MALLOPT is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return _MALLOPT(_M_ARENA_MAX, arenas) == 1


def trim() -> bool:
    """Return the heap's free pages to the system; False where that is not possible
    (no ``malloc_trim``, or nothing to give back)."""
    return _TRIM is not None and _TRIM(0) == 1


async def trim_every(seconds: float = TRIM_EVERY) -> None:
    """The lifespan's task: a trim every ``seconds``, off the event loop."""
    if _TRIM is None:
        log.debug("no malloc_trim in this C library: the heap is not trimmed")
        return
    while True:
        await asyncio.sleep(seconds)
        await asyncio.to_thread(trim)
