"""Routing a pool of engines: affinity vs round-robin vs least-load, one run.

Two upstream engines, each a fresh `kefu serve` on the embedded model (its prefix cache
keeps each conversation's KV after a reply, and its /ready counts the prompt tokens that
came from it), a kefu in front with `--engine A --engine B --routing MODE`, and a multi-turn
workload from `kefu bench` (--users sessions at once, --turns turns each, no think time).
Printed per mode: the prefix reuse rate on the engines (prompt tokens whose KV was reused,
over all prompt tokens), TTFT p50/p99 and E2E p50 as the customers saw them, and how the
requests split between the engines. Fresh engines per mode, so no mode inherits a warm cache.

    .venv/bin/python benchmarks/routing.py [--users 8] [--turns 5] [--max-tokens 24]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from harness import kefu_server

MODES = ("affinity", "round-robin", "least-load")


def engine_counts(url: str) -> tuple[int, int]:
    """Prompt tokens, and those whose KV came from the prefix cache, so far."""
    engine = httpx.get(url + "/ready", timeout=10).json()["engine"]
    return int(engine["prompt_tokens"]), int(engine["prefix_reused_tokens"])


def run_mode(mode: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    upstream_flags = ["--no-fast-path", "--threads", "1", "--parallel", "4"]
    with ExitStack() as stack:
        engines = [stack.enter_context(kefu_server(*upstream_flags)) for _ in range(2)]
        front_flags = ["--no-fast-path", "--routing", mode, "--max-tokens", str(args.max_tokens)]
        front_flags += ["--parallel", "16"]
        for url in engines:
            front_flags += ["--engine", url + "/v1"]
        front = stack.enter_context(kefu_server(*front_flags))
        before = [engine_counts(url) for url in engines]
        command = [sys.executable, "-m", "kefu", "bench", "--url", front, "--api", "chat"]
        command += ["--users", str(args.users), "--turns", str(args.turns), "--think", "0"]
        command += ["--requests", str(args.users * args.turns), "--repeat-share", "0"]
        command += ["--order-share", "0", "--seed", str(args.seed), "--no-progress"]
        command += ["--out", str(out / mode), "--label", mode]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        after = [engine_counts(url) for url in engines]
        rows = httpx.get(front + "/ready", timeout=10).json()["engine"]["engines"]
    prompt = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    reused = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
    summary = json.loads((out / mode / "summary.json").read_text(encoding="utf-8"))
    return {
        "mode": mode,
        "reuse": reused / prompt if prompt else 0.0,
        "prompt": prompt,
        "reused": reused,
        "summary": summary,
        "split": [row["requests"] for row in rows],
    }


def figure(summary: dict[str, Any], metric: str, q: str) -> float:
    """A percentile in ms from `kefu bench`'s summary.json (its one level; seconds there)."""
    value: float = summary["levels"][0]["summary"][metric][q] * 1000
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=8, help="sessions at once")
    parser.add_argument("--turns", type=int, default=5, help="turns per session")
    parser.add_argument("--max-tokens", type=int, default=24, help="reply length cap")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="kefu-routing-"))
    results = [run_mode(mode, args, out) for mode in MODES]
    print(
        f"two kefu engines (embedded SmolLM2-135M, 1 thread each), {args.users} sessions x "
        f"{args.turns} turns through /chat, replies up to {args.max_tokens} tokens\n"
    )
    print(
        "| routing | prefix reuse on the engines | TTFT p50 ms | TTFT p99 ms | E2E p50 ms "
        "| requests per engine |\n|---|---|---|---|---|---|"
    )
    for r in results:
        s = r["summary"]
        print(
            f"| {r['mode']} | {r['reuse']:.1%} ({r['reused']} of {r['prompt']} tokens) | "
            f"{figure(s, 'ttft', 'p50'):.0f} | {figure(s, 'ttft', 'p99'):.0f} | "
            f"{figure(s, 'e2e', 'p50'):.0f} | {' / '.join(map(str, r['split']))} |"
        )
    base = results[1]
    for r in (results[0], results[2]):
        ratio = figure(base["summary"], "ttft", "p50") / figure(r["summary"], "ttft", "p50")
        print(f"TTFT p50, round-robin / {r['mode']}: {ratio:.2f}x")
    print(f"\nreports: {out}")


if __name__ == "__main__":
    main()
