"""A fresh server's first burst (issue 36): why the first answers of a burst miss an SLO
that the later ones make, and how much the decode threads' niceness has to do with it.

Each run is a fresh ``kefu serve`` (defaults, bundled model, ``--parallel P``) that
``--clients`` closed-loop /v1 streams (``admission.py``'s) reach at once; runs alternate
``--engine-nice`` between the values given. From the server's own request log, for the
first wave (the first P answers, granted their slots before any first token came) and for
the answers after it: TTFT and the prediction admission made for it, the prompt's
reading (``prefill_ms``), the time per output token and what the HTTP layer took before
admission (parse and context). Over the run: sent, answered, refused, SLO misses among
the answered.

    ../.venv/bin/python fresh_burst.py [--clients 80] [--duration 20] [--nice 19,0] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from admission import QUESTIONS, closed_loop
from harness import kefu_process, percentile, summary
from kefu.engine.base import ChatMessage, GenerationRequest, SamplingParams
from kefu.engine.llamacpp.engine import LlamaCppEngine


@dataclass
class Burst:
    nice: int
    sent: int
    refused: int
    answers: list[dict[str, Any]]  # the request log's lines of answered streams, in order


def missed(answers: list[dict[str, Any]], slo_ms: float) -> int:
    """Answers whose first token came after the SLO."""
    return sum(a["ttft_ms"] > slo_ms for a in answers)


def answered(log: Path) -> list[dict[str, Any]]:
    """The request log's answered /v1 streams, in the order they came."""
    lines = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith('{"event": "request"'):
            continue
        record = json.loads(line)
        if record["route"] == "/v1/chat/completions" and record.get("ttft_ms") is not None:
            lines.append(record)
    # "at" is when the line was written, at the end: less the time it took, when it came.
    return sorted(lines, key=lambda r: r["at"] - r["e2e_ms"] / 1000)


def run_once(nice: int, args: argparse.Namespace) -> Burst:
    flags = ["--parallel", str(args.parallel), "--ttft-slo", str(args.slo)]
    flags += ["--engine-nice", str(nice), "--log-level", "info"]
    with tempfile.TemporaryDirectory(prefix="kefu-burst-") as scratch:
        log = Path(scratch) / "server.log"
        with kefu_process(*flags, ready_timeout=600, log=log) as (url, _):
            requests = asyncio.run(closed_loop(url, args.clients, args.duration, args.seed))
        refused = sum(r.refused for r in requests)
        return Burst(nice, len(requests), refused, answered(log))


async def engine_alone(slots: int, bursts: int = 4) -> list[list[float]]:
    """``bursts`` bursts of ``slots`` questions never asked before, each sent at once to the
    embedded engine: seconds to each first token."""
    engine = LlamaCppEngine(slots=slots)
    await engine.start()
    asked = 0

    async def first_token(started: float) -> float:
        nonlocal asked
        asked += 1
        question = QUESTIONS[asked % len(QUESTIONS)].format(n=10_000 + 7_919 * asked)
        request = GenerationRequest(
            messages=[ChatMessage("user", question)],
            sampling=SamplingParams(max_tokens=16, temperature=0.7),
            request_id=f"burst-{asked}",
        )
        first = None
        async for _ in engine.generate(request):
            first = first or time.perf_counter() - started
        return first or float("nan")

    try:
        results = []
        for _ in range(bursts):
            started = time.perf_counter()
            results.append(await asyncio.gather(*(first_token(started) for _ in range(slots))))
        return results
    finally:
        await engine.close()


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


def wave(answers: list[dict[str, Any]]) -> str:
    """TTFT p50/max, predicted p50, prefill p50, per-token p50, parse+context p50 (ms)."""
    if not answers:
        return "-"
    ttft = [a["ttft_ms"] for a in answers]
    predicted = [a["timings"].get("predicted_ttft_ms") for a in answers]
    http = [a["stages_ms"].get("parse", 0) + a["stages_ms"].get("context", 0) for a in answers]
    return (
        f"{median(ttft):>5}/{max(ttft):>5.0f} {median([p for p in predicted if p]):>5} "
        f"{median([a['prefill_ms'] for a in answers]):>6} "
        f"{median([a['tpot_ms'] for a in answers if a.get('tpot_ms')]):>4} {median(http):>4}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--clients", type=int, default=80, help="closed-loop /v1 streams")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per run")
    parser.add_argument("--nice", default="19,0", help="--engine-nice values, alternated")
    parser.add_argument("--repeat", type=int, default=2, help="runs per value")
    parser.add_argument("--parallel", type=int, default=8, help="engine slots")
    parser.add_argument("--slo", type=float, default=2.0, help="TTFT SLO in seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    values = [int(v) for v in args.nice.split(",")]
    slo_ms = args.slo * 1000
    print(
        f"fresh kefu serve per run, --parallel {args.parallel}, {args.clients} /v1 streams at "
        f"once for {args.duration:g} s, TTFT SLO {args.slo:g} s (times in ms)\n"
    )
    for i, firsts in enumerate(asyncio.run(engine_alone(args.parallel))):
        print(
            f"the engine alone, burst {i + 1} of {args.parallel} new questions: first tokens "
            f"{min(firsts) * 1000:.0f}-{max(firsts) * 1000:.0f} ms"
        )
    print()
    columns = f"{'ttft50/max':>11} {'pred':>5} {'prefil':>6} {'tpot':>4} {'http':>4}"
    print(f"{'':28}| {'the first wave':<34} | the answers after it")
    totals = f"{'nice':>4} {'sent':>5} {'answd':>5} {'refsd':>5} {'miss':>4}"
    print(f"{totals} | {columns} | {columns} miss")
    runs: list[Burst] = []
    for round_ in range(args.repeat):
        # Alternate which goes first: the box's speed drifts between runs.
        for nice in values if round_ % 2 == 0 else values[::-1]:
            run = run_once(nice, args)
            runs.append(run)
            first, later = run.answers[: args.parallel], run.answers[args.parallel :]
            print(
                f"{nice:>4} {run.sent:>5} {len(run.answers):>5} {run.refused:>5} "
                f"{missed(run.answers, slo_ms):>4} | {wave(first)} | {wave(later)} "
                f"{missed(later, slo_ms):>4}",
                flush=True,
            )
    print()
    for nice in values:
        mine = [r for r in runs if r.nice == nice]
        firsts = [a["ttft_ms"] for r in mine for a in r.answers[: args.parallel]]
        answers = sum(len(r.answers) for r in mine)
        lost = sum(missed(r.answers, slo_ms) for r in mine)
        print(
            f"--engine-nice {nice}: {lost} of {answers} answers missed; first waves' TTFT "
            f"p50 {percentile(firsts, 50):.0f} ms, max {max(firsts, default=0):.0f} ms"
        )


if __name__ == "__main__":
    main()
