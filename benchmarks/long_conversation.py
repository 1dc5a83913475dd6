"""Long conversations: TTFT and prompt size by turn, rolling summary vs window vs everything.

One run, one machine, the real bundled model. For each mode a fresh ``kefu serve``
(subprocess, --no-fast-path so every turn reaches the model, greedy, --admission queue so
nothing is refused; with ``--fast-path`` the fast path answers what it can and its
passages go into the model's prompt, and the figures are the model's turns) takes
``--sessions`` concurrent conversations of ``--turns`` turns each over POST /chat:

  summary  --memory summary --history-turns 3: the memory (summary + facts) and the turns
           since its last update (every --memory-every turns, in the background)
  window   --memory window --history-turns 3: the last 3 turns; older ones are forgotten
  full     --memory window --history-turns 1000: the whole conversation (the context
           builder still drops the oldest turns when the window is full)

Per turn it prints TTFT p50/p99 (client side: from sending to the first `token` event)
and the mean prompt tokens from the `done` event's usage, for turns 1, 2, 5, 10 and 20
(those that exist), and per mode the prefix reuse: cached / prompt tokens over all
turns. A turn 20 / turn 2 TTFT ratio near 1 is the point of ``summary``; one turn's
p50 is ``--sessions`` samples, so it also prints turns 11-20 / turns 2-5 pooled over
every session, and the memory's work as the server's ``/metrics`` counted it. Customers
take ``--think`` seconds between a reply and their next message: the summary is built
while no customer waits, so back-to-back turns (0) leave it little room.

The figures are printed, never judged: the script exits 0 whatever the times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from harness import interpolated_percentile, kefu_server, sse_events
from kefu.engine.bundled import bundled_model_path

MODES = {
    "summary": ["--memory", "summary", "--history-turns", "3"],
    "window": ["--memory", "window", "--history-turns", "3"],
    "full": ["--memory", "window", "--history-turns", "1000"],
}
REPORTED_TURNS = (1, 2, 5, 10, 20)

# A customer with a problem, then the questions that follow it; not the demo shop's.
OPENING = "Hi, my order {order} arrived with a cracked lid on the kettle, size M box."
FOLLOW_UPS = [
    "Can you send a replacement lid instead of a new kettle?",
    "How long would the replacement take to arrive?",
    "Do I need to send the broken lid back first?",
    "Is there a prepaid label for that?",
    "Can the courier pick it up from my office?",
    "My office is open until six in the evening, is that fine?",
    "Will I get an email when the new lid ships?",
    "Could you also check the warranty on the kettle itself?",
    "The base makes a clicking noise too, is that normal?",
    "Should I stop using it until the lid arrives?",
    "What if the new lid is also damaged?",
    "Can I get a partial refund for the trouble?",
    "How is a partial refund paid out?",
    "Does the refund go back to my credit card?",
    "How many days does the bank take?",
    "Can I change the delivery address for the lid?",
    "It should go to my neighbour at number 12.",
    "Will the courier need a signature?",
    "Thanks, is there anything else I should know?",
]


@dataclass(frozen=True)
class TurnResult:
    turn: int
    ttft: float
    prompt_tokens: int
    cached_tokens: int
    reply: str
    tier: str = "llm"
    queue_ms: float = float("nan")  # admitted -> prefill started (the engine's queue)
    prefill_ms: float = float("nan")  # prefill started -> first token


async def chat_turn(
    client: httpx.AsyncClient, url: str, message: str, session_id: str | None
) -> tuple[str, TurnResult, dict[str, Any]]:
    """One POST /chat, read as SSE; returns the session id, the figures and `done`."""
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["session_id"] = session_id
    sent = time.perf_counter()
    first: float | None = None
    done: dict[str, Any] | None = None
    async with client.stream("POST", url + "/chat", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"/chat answered {response.status_code}: {await response.aread()!r}")
        async for event in sse_events(response):
            if event.event == "token" and first is None:
                first = time.perf_counter()
            elif event.event == "done":
                done = json.loads(event.data)
            elif event.event == "error":
                raise RuntimeError(f"/chat failed: {event.data}")
    if done is None:
        raise RuntimeError("/chat ended without `done`")
    usage = done["usage"]
    result = TurnResult(
        turn=0,
        ttft=(first or time.perf_counter()) - sent,
        prompt_tokens=int(usage["prompt_tokens"]),
        cached_tokens=int(usage.get("cached_prompt_tokens", 0)),
        reply=str(done["reply"]),
        tier=str(done.get("tier", "llm")),
        queue_ms=float(done["timings"].get("queue_ms", float("nan"))),
        prefill_ms=float(done["timings"].get("prefill_ms", float("nan"))),
    )
    return str(done["session_id"]), result, done


def server_flags(args: argparse.Namespace, mode: str) -> list[str]:
    return [
        *MODES[mode],
        "--model",
        str(args.model),
        "--threads",
        str(args.threads),
        *([] if args.fast_path else ["--no-fast-path"]),
        # Every turn waits its turn: the figures are the prompts' cost, not admission's.
        "--admission",
        "queue",
        "--temperature",
        "0",
        "--max-tokens",
        str(args.max_tokens),
        "--engine-nice",
        str(args.engine_nice),
    ]


async def conversation(
    client: httpx.AsyncClient, url: str, number: int, turns: int, think: float
) -> list[TurnResult]:
    messages = [OPENING.format(order=f"LH-{500100 + number}")]
    messages += [FOLLOW_UPS[i % len(FOLLOW_UPS)] for i in range(turns - 1)]
    session_id: str | None = None
    results = []
    for turn, message in enumerate(messages, start=1):
        if turn > 1:
            await asyncio.sleep(think)  # the customer reads the reply and types
        session_id, result, _ = await chat_turn(client, url, message, session_id)
        results.append(replace(result, turn=turn, reply=""))
    return results


MEMORY_COUNTERS = (
    "kefu_memory_folds_total",
    "kefu_memory_model_summaries_total",
    "kefu_memory_summary_failures_total",
    "kefu_memory_summary_seconds_total",
)


async def run_mode(
    args: argparse.Namespace, mode: str
) -> tuple[list[TurnResult], dict[str, float]]:
    """Every turn's figures, and the memory's work as the server's /metrics counted it."""
    with kefu_server(*server_flags(args, mode)) as url:
        timeout = httpx.Timeout(300.0)
        async with httpx.AsyncClient(timeout=timeout) as client:
            runs = [
                conversation(client, url, n, args.turns, args.think) for n in range(args.sessions)
            ]
            per_session = await asyncio.gather(*runs)
            metrics = (await client.get(url + "/metrics")).text
    work = {
        name: float(line.split()[1])
        for line in metrics.splitlines()
        for name in MEMORY_COUNTERS
        if line.startswith(name + " ")
    }
    results = [result for session in per_session for result in session]
    # The model's turns only: a turn the fast path answered reads no prompt.
    return [r for r in results if r.tier == "llm"], work


def pooled_p50(results: list[TurnResult], first: int, last: int) -> float:
    """TTFT p50 over every session's turns ``first``..``last``: one turn's p50 is 8 samples."""
    ttfts = [r.ttft * 1000 for r in results if first <= r.turn <= last]
    return interpolated_percentile(ttfts, 50) if ttfts else float("nan")


def report(mode: str, results: list[TurnResult], every_turn: bool) -> dict[int, float]:
    by_turn: dict[int, list[TurnResult]] = defaultdict(list)
    for result in results:
        by_turn[result.turn].append(result)
    p50s = {}
    shown = sorted(by_turn) if every_turn else [t for t in REPORTED_TURNS if t in by_turn]
    for turn in shown:
        rows = by_turn[turn]
        ttfts = [r.ttft * 1000 for r in rows]
        p50s[turn] = interpolated_percentile(ttfts, 50)
        prompt = sum(r.prompt_tokens for r in rows) / len(rows)
        reuse = sum(r.cached_tokens for r in rows) / max(sum(r.prompt_tokens for r in rows), 1)
        queue = interpolated_percentile([r.queue_ms for r in rows], 50)
        prefill = interpolated_percentile([r.prefill_ms for r in rows], 50)
        print(
            f"  {mode:8s} turn {turn:2d}: TTFT p50 {p50s[turn]:7.1f} ms  "
            f"p99 {interpolated_percentile(ttfts, 99):7.1f} ms  prompt {prompt:6.0f} tokens  "
            f"reused {reuse:6.1%}  queue p50 {queue:6.1f} ms  prefill p50 {prefill:6.1f} ms"
        )
    prompt_total = sum(r.prompt_tokens for r in results)
    cached = sum(r.cached_tokens for r in results)
    share = cached / max(prompt_total, 1)
    print(f"  {mode:8s} prefix reuse: {share:.1%} of {prompt_total} prompt tokens")
    return p50s


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=8, help="concurrent conversations")
    parser.add_argument("--turns", type=int, default=20, help="turns per conversation")
    parser.add_argument("--max-tokens", type=int, default=48, help="reply length cap")
    parser.add_argument(
        "--think", type=float, default=2.0, help="seconds a customer takes between turns"
    )
    parser.add_argument("--threads", type=int, default=2, help="decode threads")
    parser.add_argument(
        "--engine-nice",
        type=int,
        default=19,
        help="kefu's --engine-nice; 0 on a machine shared with other work, where 19 leaves "
        "the decode threads only what everything else does not take",
    )
    parser.add_argument("--model", type=Path, default=bundled_model_path(), help="GGUF file")
    parser.add_argument(
        "--modes", default="summary,window,full", help="comma-separated: summary, window, full"
    )
    parser.add_argument(
        "--fast-path",
        action="store_true",
        help="keep kefu's fast path on: it answers what it can from the knowledge base and "
        "its passages go into the model's prompt (the figures are the model's turns only)",
    )
    parser.add_argument(
        "--every-turn", action="store_true", help="a line for every turn, not only 1/2/5/10/20"
    )
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    print(
        f"long conversations: {args.sessions} sessions x {args.turns} turns, "
        f"max_tokens {args.max_tokens}, think {args.think:g} s, {args.threads} threads, "
        f"engine nice {args.engine_nice}, fast path {'on' if args.fast_path else 'off'}, "
        f"model {args.model.name}"
    )
    last = max((t for t in REPORTED_TURNS if t <= args.turns), default=1)
    for mode in modes:
        started = time.perf_counter()
        results, work = asyncio.run(run_mode(args, mode))
        p50s = report(mode, results, args.every_turn)
        ratio = p50s.get(last, float("nan")) / p50s.get(2, float("nan"))
        print(
            f"  {mode:8s} TTFT p50 turn {last} / turn 2: {ratio:.2f}x "
            f"({time.perf_counter() - started:.0f} s)"
        )
        if args.turns >= 20:
            late, early = pooled_p50(results, 11, 20), pooled_p50(results, 2, 5)
            print(
                f"  {mode:8s} TTFT p50 of turns 11-20 / turns 2-5 (all sessions): "
                f"{late:.1f} / {early:.1f} ms = {late / early:.2f}x"
            )
        if work.get("kefu_memory_folds_total"):
            print(
                f"  {mode:8s} memory: {work['kefu_memory_folds_total']:.0f} folds, "
                f"{work.get('kefu_memory_model_summaries_total', 0):.0f} model summaries used, "
                f"{work.get('kefu_memory_summary_failures_total', 0):.0f} failed or late, "
                f"{work.get('kefu_memory_summary_seconds_total', 0):.1f} s waited on them"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
