"""Recall in long conversations: a fact stated in the first turns, asked for 10+ turns later.

One run, the real model (default: the bundled 135M), --no-fast-path, greedy. Each
conversation of ``data/recall.json`` (24: en and zh, shops, travel, telecom, food
delivery, subscriptions; order and booking references, sizes, products, complaints)
states its fact in its first one to two messages, asks ``--gap`` unrelated questions,
then asks for the fact. Two figures per mode:

  in prompt  the share of question prompts that contain the fact: model-independent,
             what the context builder gave the model (rebuilt from GET /sessions/{id}
             with kefu's own functions: the memory block and the turns kept)
  answered   the share of replies that name it (case-insensitive)

Modes (both --history-turns 3 --memory-every 3):

  summary  the memory: facts read by code, the customer's quoted sentences, the model's
           summary when the engine had room
  window   the last 3-5 turns; the first turns have long left the prompt

Before the question the script waits (up to ``--settle`` seconds, as a customer types)
for the memory to cover what is due. A bigger --model answers more of them with no
change in kefu. The figures are printed, never judged: the script exits 0 whatever the
shares.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness import kefu_server
from kefu.engine.bundled import bundled_model_path
from kefu.memory.render import memory_block
from kefu.service.turn import prompt_history
from kefu.store.base import SessionMemory, StoredMessage
from long_conversation import chat_turn

DATA = Path(__file__).parent / "data" / "recall.json"
WINDOW, EVERY = 3, 3
MODES = {
    "summary": ["--memory", "summary"],
    "window": ["--memory", "window"],
}
COMMON = ["--history-turns", str(WINDOW), "--memory-every", str(EVERY)]
# The references in the set have this shape (a shop sets its own with these flags).
ORDERS = ["--order-pattern", r"\b[A-Z]{2}-?\d{6}\b", "--order-example", "QX-100234"]


@dataclass(frozen=True)
class Case:
    language: str
    kind: str
    domain: str
    say: list[str]
    ask: str
    accept: list[str]

    def found_in(self, text: str) -> bool:
        folded = text.casefold()
        return any(word.casefold() in folded for word in self.accept)


@dataclass(frozen=True)
class Outcome:
    answered: bool
    in_prompt: bool
    ready: bool
    reply: str


def load() -> tuple[list[Case], dict[str, list[str]]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    return [Case(**case) for case in data["cases"]], data["fillers"]


def due_coverage(last_turn: int) -> int:
    """The turn the summary-mode memory covers once every due fold is done."""
    covered = 0
    for turn in range(1, last_turn + 1):
        if turn - covered >= WINDOW + EVERY:
            covered = turn - WINDOW
    return covered


async def session_state(
    client: httpx.AsyncClient, url: str, session_id: str
) -> tuple[SessionMemory | None, list[StoredMessage]]:
    body: dict[str, Any] = (await client.get(f"{url}/sessions/{session_id}")).json()
    memory = body.get("memory")
    stored = [
        StoredMessage(m["role"], m["content"], m["created_at"], turn=m["turn"])
        for m in body["messages"]
    ]
    return (SessionMemory.from_dict(memory) if memory else None), stored


async def prompt_text(
    client: httpx.AsyncClient, url: str, session_id: str, mode: str, settle: float
) -> tuple[str, bool]:
    """What the next prompt holds besides the persona and the question, and whether the
    memory was ready (summary mode waits up to ``settle`` seconds for it)."""
    deadline = time.monotonic() + settle
    while True:
        memory, stored = await session_state(client, url, session_id)
        due = due_coverage(stored[-1].turn) if mode == "summary" else 0
        ready = memory is not None and memory.covered_turn >= due
        if mode == "window" or ready or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    covered = memory.covered_turn if memory is not None else 0
    turns, _ = prompt_history(stored, WINDOW, mode, covered, EVERY)
    parts = [memory_block(memory) if mode == "summary" else ""]
    parts += [m.content for turn in turns for m in turn]
    return "\n".join(parts), ready or mode == "window"


async def one(
    client: httpx.AsyncClient,
    url: str,
    case: Case,
    fillers: list[str],
    args: argparse.Namespace,
    mode: str,
) -> Outcome:
    session_id: str | None = None
    for message in case.say:
        session_id, _, _ = await chat_turn(client, url, message, session_id)
    for i in range(args.gap):
        session_id, _, _ = await chat_turn(client, url, fillers[i % len(fillers)], session_id)
    assert session_id is not None
    text, ready = await prompt_text(client, url, session_id, mode, args.settle)
    _, result, _ = await chat_turn(client, url, case.ask, session_id)
    return Outcome(case.found_in(result.reply), case.found_in(text), ready, result.reply)


async def run_mode(
    args: argparse.Namespace, mode: str, cases: list[Case], fillers: dict[str, list[str]]
) -> list[Outcome]:
    flags = [*MODES[mode], *COMMON, *ORDERS, "--model", str(args.model)]
    flags += ["--threads", str(args.threads), "--engine-nice", str(args.engine_nice)]
    flags += ["--parallel", str(args.concurrency)]
    flags += ["--no-fast-path", "--temperature", "0", "--max-tokens", str(args.max_tokens)]
    # As many conversations at once as the engine has slots: more would only queue.
    gate = asyncio.Semaphore(args.concurrency)

    async def gated(client: httpx.AsyncClient, url: str, case: Case) -> Outcome:
        async with gate:
            return await one(client, url, case, fillers[case.language], args, mode)

    with kefu_server(*flags) as url:
        async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as client:
            return list(await asyncio.gather(*(gated(client, url, c) for c in cases)))


def report(mode: str, cases: list[Case], outcomes: list[Outcome], verbose: bool) -> None:
    n = len(cases)
    answered = sum(o.answered for o in outcomes)
    held = sum(o.in_prompt for o in outcomes)
    ready = sum(o.ready for o in outcomes)
    print(
        f"  {mode:8s} fact in prompt {held:2d}/{n} ({held / n:4.0%})  "
        f"answered with it {answered:2d}/{n} ({answered / n:4.0%})  memory ready {ready}/{n}"
    )
    for group in ("kind", "language"):
        totals: Counter[str] = Counter()
        prompts: Counter[str] = Counter()
        replies: Counter[str] = Counter()
        for case, outcome in zip(cases, outcomes, strict=True):
            key = getattr(case, group)
            totals[key] += 1
            prompts[key] += outcome.in_prompt
            replies[key] += outcome.answered
        row = "  ".join(f"{k} {prompts[k]}/{replies[k]}/{totals[k]}" for k in sorted(totals))
        print(f"    by {group} (in prompt/answered/all): {row}")
    if verbose:
        for case, outcome in zip(cases, outcomes, strict=True):
            marks = f"{'P' if outcome.in_prompt else '-'}{'A' if outcome.answered else '-'}"
            print(f"    {marks} {case.accept[0]:10s} {outcome.reply[:90]!r}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--gap", type=int, default=10, help="turns between the fact and the question"
    )
    parser.add_argument("--cases", type=int, default=0, help="the first N conversations (0: all)")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="conversations at once, and kefu's --parallel"
    )
    parser.add_argument("--settle", type=float, default=30.0, help="seconds to wait for the memory")
    parser.add_argument("--max-tokens", type=int, default=48, help="reply length cap")
    parser.add_argument("--threads", type=int, default=2, help="decode threads")
    parser.add_argument(
        "--engine-nice", type=int, default=19, help="kefu's --engine-nice (0 on a shared machine)"
    )
    parser.add_argument("--model", type=Path, default=bundled_model_path(), help="GGUF file")
    parser.add_argument(
        "--modes", default="summary,window", help="comma-separated: summary, window"
    )
    parser.add_argument("--verbose", action="store_true", help="every reply, marked P and A")
    args = parser.parse_args()
    cases, fillers = load()
    cases = cases[: args.cases or len(cases)]
    print(
        f"recall after {args.gap} turns: {len(cases)} conversations, model {args.model.name}, "
        f"--history-turns {WINDOW} --memory-every {EVERY}"
    )
    for mode in [m for m in args.modes.split(",") if m]:
        started = time.perf_counter()
        report(mode, cases, asyncio.run(run_mode(args, mode, cases, fillers)), args.verbose)
        print(f"    ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
