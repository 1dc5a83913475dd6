"""Threads and the CPU: background work yields it to the event loop and the fast path, and
numpy's BLAS runs on the thread that calls it."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from threadpoolctl import threadpool_limits

log = logging.getLogger("kefu")


def lower_priority(nice: int, what: str) -> None:
    """Add ``nice`` to the calling thread's niceness. On Linux niceness is per thread,
    threads started from this one inherit it, and raising it needs no privilege."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        log.debug("%s (thread %d) runs at nice %+d", what, tid, nice)
    except OSError as exc:
        log.warning("could not lower the priority of %s: %s", what, exc)


def one_blas_thread() -> Callable[[], None]:
    """Run numpy's BLAS on the calling thread alone, process-wide; returns what gives
    the previous limit back.

    The fast path's products are small (a few words against the knowledge base's
    vocabulary, a message against ~1 000 entries: tens of microseconds on one core), and
    OpenBLAS's own threads (one per core by default) cost more than they save: each call
    wakes a helper that must wait for a core llama.cpp or the load is using, and idle
    helpers spin. With two, the fast path's lookups took 60 ms at p99 on a busy
    2-core box, and 14-22 ms on one thread; the median did not move."""
    limits = threadpool_limits(limits=1, user_api="blas")

    def restore() -> None:
        limits.restore_original_limits()

    return restore
