"""Devices: the built-in accelerator table, and a CPU described by the user or measured.

Card memory is what CUDA reports as the device's total (what vLLM multiplies by
--gpu-memory-utilization), a little under the nominal GB on the box. Bandwidth and
dense (no sparsity) bf16 tensor TFLOP/s are the vendors' datasheet peaks. Rents are
rough on-demand cloud prices per card, USD a month (730 h), as of late 2025: they move
often and vary by provider, so check yours (--rent NAME=USD overrides one).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from kefu.plan import PlanError

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    memory_gib: float  # usable total, as the runtime reports it
    bandwidth_gbs: float  # GB/s (10^9 bytes)
    tflops: float  # dense bf16 (GPU) or measured float32 matmul (CPU)
    monthly_usd: float | None  # None: a machine you already have
    is_gpu: bool = True
    source: str = "datasheet"


CARDS: dict[str, Device] = {
    card.name: card
    for card in (
        Device("RTX 4090", 23.6, 1008, 165.2, 250),
        Device("A10", 22.0, 600, 125, 550),
        Device("L20", 44.4, 864, 119.5, 650),
        Device("L40S", 44.4, 864, 362, 750),
        Device("A100 40GB", 39.4, 1555, 312, 950),
        Device("A100 80GB", 79.2, 2039, 312, 1200),
        # 79.19 GiB: vLLM's total_gpu_memory on the H100 SXM behind llm-d's measurement.
        Device("H100", 79.19, 3350, 989, 1800),
        Device("H200", 139.8, 4800, 989, 2600),
    )
}


def card(name: str) -> Device:
    wanted = name.replace(" ", "").replace("-", "").lower()
    for key, device in CARDS.items():
        if key.replace(" ", "").lower() == wanted:
            return device
    raise PlanError(f"unknown card {name!r}; one of: {', '.join(CARDS)}")


def with_rent(cards: list[Device], overrides: dict[str, float]) -> list[Device]:
    by_key = {card(name).name: usd for name, usd in overrides.items()}
    return [replace(c, monthly_usd=by_key.get(c.name, c.monthly_usd)) for c in cards]


def _copy_bandwidth(threads: int, mib: int = 64, rounds: int = 5) -> float:
    """GB/s of large array copies on ``threads`` threads (numpy releases the GIL in a copy);
    a copy reads and writes each byte, so both count."""
    size = mib * 1024 * 1024 // 8
    pairs = [(np.ones(size), np.empty(size)) for _ in range(threads)]

    def copy(pair: tuple[np.ndarray, np.ndarray]) -> None:
        np.copyto(pair[1], pair[0])

    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(copy, pairs))  # touch the pages first
        for _ in range(rounds):
            start = time.perf_counter()
            list(pool.map(copy, pairs))
            best = min(best, time.perf_counter() - start)
    return 2 * threads * size * 8 / best / 1e9


def _matmul_tflops(n: int = 1024, rounds: int = 3) -> float:
    a = np.ones((n, n), dtype=np.float32)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e12


def _ram_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB


def cpu(bandwidth_gbs: float | None, tflops: float | None, threads: int | None) -> Device:
    """This machine's CPU: figures the user gave, the rest measured in about a second."""
    threads = threads or os.cpu_count() or 1
    measured = []
    if bandwidth_gbs is None:
        bandwidth_gbs = _copy_bandwidth(threads)
        measured.append("bandwidth")
    if tflops is None:
        tflops = _matmul_tflops()
        measured.append("float32 matmul")
    source = f"measured here ({', '.join(measured)})" if measured else "given"
    return Device(
        name=f"CPU ({threads} threads)",
        memory_gib=_ram_gib(),
        bandwidth_gbs=bandwidth_gbs,
        tflops=tflops,
        monthly_usd=None,
        is_gpu=False,
        source=source,
    )
