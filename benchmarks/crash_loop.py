"""Crash consistency (issue 23 item 7): kill -9 kefu in a loop during load; after each
restart every turn that got `done` is there, no session is corrupt, no half turn shown.

One data dir (SQLite in WAL mode) for every cycle. Each cycle starts `kefu serve` (the
bundled model by default; --max-tokens keeps LLM replies short so turns finish), lets
--clients customers talk to it (each its own conversation, turn after turn: FAQ
questions the fast path answers and general ones the LLM answers), and after a random
1-3 s of that load sends SIGKILL. Then, before the restart, `PRAGMA integrity_check`
on the sessions database; after it, GET /sessions/{id} of every conversation:

  - lost: a turn whose `done` arrived, missing or with another reply (target 0);
  - half: a stored turn without its user message or its reply (target 0);
  - corrupt: a session that does not load (not 200) or a failed integrity check (target 0).

Turns cut by the kill (sent, no `done`) may be stored whole or not at all.

    .venv/bin/python benchmarks/crash_loop.py [--cycles 10] [--clients 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness import kefu_process, sse_events, summary

MESSAGES = (
    "How long does delivery take?",
    "What is your return policy?",
    "Hello!",
    "Can you suggest a gift for someone who likes reading in bed?",
    "Tell me something about caring for a wooden table.",
    "Do you ship abroad?",
)


@dataclass
class Conversation:
    session_id: str | None = None
    done: list[str] = field(default_factory=list)  # replies whose `done` arrived, in order


@dataclass
class Cycle:
    cycle: int
    sent: int = 0
    done: int = 0
    cut: int = 0  # sent, no `done`: the kill came first
    lost: int = 0
    half: int = 0
    corrupt: int = 0
    sessions: int = 0
    stored_turns: int = 0
    integrity: str = ""


async def talk(
    client: httpx.AsyncClient, convo: Conversation, cycle: Cycle, rng: random.Random
) -> None:
    """Turn after turn until the server dies under us."""
    while True:
        body: dict[str, Any] = {"message": rng.choice(MESSAGES)}
        if convo.session_id is not None:
            body["session_id"] = convo.session_id
        cycle.sent += 1
        try:
            async with client.stream("POST", "/chat", json=body) as response:
                reply = None
                async for event in sse_events(response):
                    data = json.loads(event.data)
                    if event.event == "meta":
                        convo.session_id = data["session_id"]
                    elif event.event == "done":
                        reply = data["reply"]
                        convo.session_id = data["session_id"]
            if reply is None:
                cycle.cut += 1
                if response.status_code != 200:
                    await asyncio.sleep(0.2)  # a busy answer: try again
                    continue
                return
            convo.done.append(reply)
            cycle.done += 1
        except (httpx.HTTPError, OSError):
            cycle.cut += 1
            return


async def load_and_kill(
    url: str, pid: int, convos: list[Conversation], cycle: Cycle, rng: random.Random
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        tasks = [
            asyncio.create_task(talk(client, c, cycle, random.Random(rng.random()))) for c in convos
        ]
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        os.kill(pid, signal.SIGKILL)
        await asyncio.gather(*tasks, return_exceptions=True)


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def verify(url: str, convos: list[Conversation], cycle: Cycle) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        for convo in convos:
            if convo.session_id is None:
                cycle.lost += len(convo.done)
                continue
            response = client.get(f"/sessions/{convo.session_id}")
            if response.status_code == 404 and not convo.done:
                continue  # its first turn was cut: never stored, as it should be
            if response.status_code != 200:
                cycle.corrupt += 1
                cycle.lost += len(convo.done)
                continue
            cycle.sessions += 1
            turns: dict[int, dict[str, str]] = {}
            for message in response.json()["messages"]:
                turns.setdefault(message["turn"], {})[message["role"]] = message["content"]
            cycle.stored_turns += len(turns)
            cycle.half += sum(1 for t in turns.values() if set(t) != {"user", "assistant"})
            replies = [turns[n].get("assistant") for n in sorted(turns)]
            # Every done turn, in order; a cut turn stored whole may sit between them.
            position = 0
            for reply in replies:
                if position < len(convo.done) and reply == convo.done[position]:
                    position += 1
            cycle.lost += len(convo.done) - position


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8, help="conversations per cycle")
    parser.add_argument("--max-tokens", type=int, default=24, help="LLM reply cap")
    parser.add_argument("--engine", default="llamacpp", help="llamacpp (default) or fake")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the cycles here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cycles: list[Cycle] = []
    flags = ["--engine", args.engine, "--max-tokens", str(args.max_tokens), "--auth", "none"]
    flags += ["--threads", "2", "--admission", "queue"]
    if args.engine == "fake":
        flags += ["--fake-token-delay", "0.01", "--fake-reply-words", "8"]
    with tempfile.TemporaryDirectory(prefix="kefu-crash-") as tmp:
        data_dir = Path(tmp)
        convos: list[Conversation] = []
        # Each start verifies the cycle before it (the restart after its kill), then
        # carries the next cycle's load until it is killed; one more start verifies the last.
        for number in range(1, args.cycles + 2):
            started = time.monotonic()
            with kefu_process(*flags, data_dir=data_dir, ready_timeout=300) as (url, process):
                if cycles:
                    verify(url, convos, cycles[-1])
                    c = cycles[-1]
                    print(f"  cycle {c.cycle}: {c.done} done, {c.lost} lost", file=sys.stderr)
                if number > args.cycles:
                    break
                cycle = Cycle(number)
                # Half the customers come back to their conversation, half are new.
                convos = [c for c in convos if rng.random() < 0.5][: args.clients // 2]
                convos += [Conversation() for _ in range(args.clients - len(convos))]
                asyncio.run(load_and_kill(url, process.pid, convos, cycle, rng))
                process.wait()
            cycle.integrity = integrity(data_dir / "sessions.db")
            cycle.corrupt += cycle.integrity != "ok"
            cycles.append(cycle)
            print(f"  cycle {number} killed ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    print(f"crash loop: kill -9 during load, {args.cycles} cycles, {args.clients} clients")
    print(
        f"{'cycle':>5} {'sent':>5} {'done':>5} {'cut':>4} {'lost':>5} {'half':>5} "
        f"{'corrupt':>7} {'sessions':>8} {'turns':>6} integrity"
    )
    for c in cycles:
        print(
            f"{c.cycle:5} {c.sent:5} {c.done:5} {c.cut:4} {c.lost:5} {c.half:5} "
            f"{c.corrupt:7} {c.sessions:8} {c.stored_turns:6} {c.integrity}"
        )
    total = {k: sum(getattr(c, k) for c in cycles) for k in ("sent", "done", "lost", "half")}
    print(f"total: {total}")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(c) for c in cycles], indent=1))


if __name__ == "__main__":
    main()
