"""Thread priority: background work yields the CPU to the event loop and the fast path."""

from __future__ import annotations

import logging
import os
import threading

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
