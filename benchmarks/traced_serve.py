"""`kefu serve` with tracemalloc on, for `soak.py --tracemalloc DIR` only (not shipped).

    python benchmarks/traced_serve.py DIR serve --port ... (the usual `kefu` arguments)

The first SIGUSR1 starts tracemalloc (tracing from the start made loading the model and
the knowledge base take over 5 minutes on a loaded box; what was allocated before is not
a leak anyway). Each later one writes DIR/NNN.txt: the process's RSS, what tracemalloc
traces (allocations since it started that are still alive), glibc's malloc counters
(mallinfo2: bytes in use and free inside the heap's arenas, which tells fragmentation and
C allocations apart from Python's) and, from the third signal on, the 40 call sites (by
traceback) that grew most since the second (the baseline). Everything runs in the signal
handler on the event loop's thread: a stall of a second or more per snapshot, which is
why this is not `kefu serve` itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import signal
import sys
import time
import tracemalloc
from pathlib import Path
from types import FrameType

FRAMES = 8
TOP = 40


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # non-mmapped space from the system
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # mmapped space
            "usmblks",
            "fsmblks",
            "uordblks",  # in use
            "fordblks",  # free inside the arenas
            "keepcost",
        )
    ]


def malloc_counters() -> str:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if not hasattr(libc, "mallinfo2"):
        return "mallinfo2: not available"
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    mib = 2**20
    return (
        f"malloc: arena {info.arena / mib:.1f} MiB, mmapped {info.hblkhd / mib:.1f} MiB, "
        f"in use {info.uordblks / mib:.1f} MiB, free in arenas {info.fordblks / mib:.1f} MiB"
    )


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    numbers = itertools.count()
    baseline: list[tracemalloc.Snapshot] = []
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]

    def dump(signum: int, frame: FrameType | None) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
            return
        started = time.perf_counter()
        snapshot = tracemalloc.take_snapshot().filter_traces(ignore)
        traced, peak = tracemalloc.get_traced_memory()
        lines = [
            f"RSS {rss_mib():.1f} MiB; traced {traced / 2**20:.1f} MiB (peak {peak / 2**20:.1f})",
            malloc_counters(),
        ]
        if not baseline:
            baseline.append(snapshot)
            lines.append("baseline")
        else:
            diffs = sorted(
                snapshot.compare_to(baseline[0], "traceback"),
                key=lambda d: d.size_diff,
                reverse=True,
            )
            grown = sum(d.size_diff for d in diffs)
            lines.append(f"traced growth since the baseline {grown / 2**20:+.2f} MiB")
            for diff in diffs[:TOP]:
                lines.append(
                    f"\n{diff.size_diff / 1024:+.1f} KiB ({diff.count_diff:+d} blocks), "
                    f"now {diff.size / 1024:.1f} KiB in {diff.count}"
                )
                lines += [f"    {f.filename}:{f.lineno}" for f in reversed(diff.traceback)]
        lines.append(f"(snapshot took {time.perf_counter() - started:.1f} s)")
        (out / f"{next(numbers):03d}.txt").write_text("\n".join(lines) + "\n")

    signal.signal(signal.SIGUSR1, dump)
    from kefu.cli import main as kefu_main

    sys.exit(kefu_main(sys.argv[2:]))


if __name__ == "__main__":
    main()
