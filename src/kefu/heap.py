"""Give the C heap's free memory back to the system: glibc's ``malloc_trim``.

Bursts of allocation (a knowledge-base import and the calibration refit after it,
prompts tokenized on worker threads, numpy temporaries) are freed, but glibc keeps
most freed memory inside its arenas, spread over pages still holding a live block,
so it never returns on its own. Under `benchmarks/soak.py` that was most of the RSS a
server gained after warm-up (15 MB in its first 7 minutes, given back by one
``malloc_trim``, while Python's own objects grew by under 3 MB). A trim every minute
keeps RSS to what is in use. Where the C library has no ``malloc_trim`` (musl, macOS)
this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger("kefu")

TRIM_EVERY = 60.0  # seconds; one trim takes milliseconds, on a worker thread


def _find_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim  # CDLL: the call releases the GIL
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _find_trim()


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
