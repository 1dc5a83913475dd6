"""Recall in long conversations: a fact stated at turn 1, asked for 10+ turns later.

One run, the real model (default: the bundled 135M), --no-fast-path, greedy. Each
conversation states one fact in its first message (an order number, a size, or a
complaint), talks about other things for ``--gap`` turns, then asks for it. A reply
that contains the fact (case-insensitive) counts as recalled. Modes:

  summary  --memory summary --history-turns 3 --memory-every 3
  window   --memory window --history-turns 3 (turn 1 has long left the prompt)

Before the question the script waits (up to ``--settle`` seconds, as a customer types)
for the session's memory to cover turn 1; it prints whether it did. The facts are read
by code (order numbers, sizes, the opening message) and put in the prompt verbatim; the
135M model's own summary is weak, and whether the model then repeats the fact is what
the share measures. A bigger --model answers more of them with no change in kefu.

The figures are printed, never judged: the script exits 0 whatever the share.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness import kefu_server
from kefu.engine.bundled import bundled_model_path
from long_conversation import FOLLOW_UPS, chat_turn

MODES = {
    "summary": ["--memory", "summary", "--history-turns", "3", "--memory-every", "3"],
    "window": ["--memory", "window", "--history-turns", "3"],
}


@dataclass(frozen=True)
class Case:
    opening: str
    question: str
    fact: str


# One of each kind first, so that --cases 3 tries all three.
CASES = [
    Case(
        "Hello, I am writing about order LH-731904, it never arrived.",
        "What is my order number?",
        "LH-731904",
    ),
    Case("I bought the rain jacket in size XL and it is too small.", "What size did I buy?", "XL"),
    Case(
        "My new blender gives off a burning smell after a minute.",
        "What was the problem I reported at the start?",
        "burning",
    ),
    Case(
        "Hi, my order LH-208815 came with a torn box.",
        "Which order number did I give you?",
        "LH-208815",
    ),
    Case(
        "The boots I got are size 38 and they pinch.", "Remind me, which size were my boots?", "38"
    ),
    Case(
        "The desk lamp I received flickers all the time.",
        "What was wrong with my item again?",
        "flicker",
    ),
]


async def wait_for_memory(
    client: httpx.AsyncClient, url: str, session_id: str, settle: float
) -> bool:
    deadline = time.monotonic() + settle
    while True:
        body = (await client.get(f"{url}/sessions/{session_id}")).json()
        memory = body.get("memory")
        if memory is not None and memory["covered_turn"] >= 1:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.25)


async def one(
    client: httpx.AsyncClient, url: str, case: Case, gap: int, settle: float, mode: str
) -> tuple[bool, bool, str]:
    session_id, _, _ = await chat_turn(client, url, case.opening, None)
    for i in range(gap):
        session_id, _, _ = await chat_turn(client, url, FOLLOW_UPS[i % len(FOLLOW_UPS)], session_id)
    ready = mode == "summary" and await wait_for_memory(client, url, session_id, settle)
    _, result, _ = await chat_turn(client, url, case.question, session_id)
    return case.fact.casefold() in result.reply.casefold(), ready, result.reply


async def run_mode(args: argparse.Namespace, mode: str) -> None:
    flags = [*MODES[mode], "--model", str(args.model), "--threads", str(args.threads)]
    flags += ["--no-fast-path", "--temperature", "0", "--max-tokens", str(args.max_tokens)]
    cases = CASES[: args.cases]
    with kefu_server(*flags) as url:
        async with httpx.AsyncClient(timeout=httpx.Timeout(300.0)) as client:
            outcomes = await asyncio.gather(
                *(one(client, url, case, args.gap, args.settle, mode) for case in cases)
            )
    recalled = sum(ok for ok, _, _ in outcomes)
    ready = sum(r for _, r, _ in outcomes)
    print(
        f"  {mode:8s} recalled {recalled}/{len(cases)}  (memory ready before the question: {ready})"
    )
    for case, (ok, _, reply) in zip(cases, outcomes, strict=True):
        print(f"    {'yes' if ok else 'no ':3s} {case.fact:10s} {reply[:110]!r}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--gap", type=int, default=10, help="turns between the fact and the question"
    )
    parser.add_argument("--cases", type=int, default=len(CASES), help="conversations per mode")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds to wait for the memory")
    parser.add_argument("--max-tokens", type=int, default=48, help="reply length cap")
    parser.add_argument("--threads", type=int, default=2, help="decode threads")
    parser.add_argument("--model", type=Path, default=bundled_model_path(), help="GGUF file")
    parser.add_argument(
        "--modes", default="summary,window", help="comma-separated: summary, window"
    )
    args = parser.parse_args()
    print(f"recall after {args.gap} turns: {args.cases} conversations, model {args.model.name}")
    for mode in [m for m in args.modes.split(",") if m]:
        asyncio.run(run_mode(args, mode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
