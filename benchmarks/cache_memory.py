"""Memory per cached answer: tracemalloc's growth while the answer cache takes --entries
answers (soak-like questions and replies, the fast path's static vectors), after a
warm-up of 200. Prints bytes per answer and the ten lines that allocated most.

    .venv/bin/python benchmarks/cache_memory.py [--entries 2000]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np

from harness import summary
from kefu.cache.answers import AnswerCache
from kefu.knowledge.embedder import StaticEmbedder

WARMUP = 200
REPLY = "A reply of about forty-eight tokens, " * 6


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--entries", type=int, default=2000, help="answers measured")
    args = parser.parse_args()
    dim = StaticEmbedder().dim
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="kefu-cache-memory-") as folder:
        cache = AnswerCache(Path(folder) / "cache.db", threshold=0.1, ttl=86400.0)

        def put(i: int) -> None:
            vector = rng.standard_normal(dim).astype(np.float32)
            vector /= np.linalg.norm(vector)
            question = f"I have a general question number {i} about the weather and your shop"
            cache.put("default", question, REPLY, vector)

        for i in range(WARMUP):
            put(i)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(WARMUP, WARMUP + args.entries):
            put(i)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
        top = tracemalloc.take_snapshot().statistics("lineno")[:10]
    print(f"{args.entries} answers ({dim}-d vectors): {grown / args.entries:.0f} bytes each,")
    print(f"{grown / 2**20:.2f} MiB in all (Python heap, tracemalloc)")
    for stat in top:
        print(f"  {stat}")


if __name__ == "__main__":
    main()
