"""Disconnect storm (issue 23 item 6): N concurrent /chat conversations on the fake engine,
most of whose clients vanish at random points; afterwards nothing may be held and no
turn that got `done` may be missing.

`kefu serve --engine fake` (a reply of --words words, --token-delay s apart) takes
--streams conversations at once, each over its own raw TCP connection. Each
conversation sends 1-3 turns; on each turn the client either reads to `done`, or
(share --vanish) vanishes at a random point: halfway through sending its request,
right after sending it, after the response headers, or after k token events; half of
the vanishing ones reset the connection (RST), half close it (FIN). A vanished client
says nothing more. Afterwards:

  - the server is idle: engine and admission running 0, nothing waiting or being read
    (no ticket left at the door), no session lock,
    pending write or background task, asyncio tasks and open sockets back to their
    levels before the storm (GET /ready's `held`, /proc of the server);
  - every conversation whose id the client saw: its stored turns begin with exactly the
    turns that got `done` (same reply text), and hold at most one more: the turn the
    client vanished in (kept as far as it went, by design).

Printed: sent / done / vanished / lost (a done turn missing or different: target 0) /
extra (a stored turn nobody sent: target 0) / leaked (target 0), and what was held.

    .venv/bin/python benchmarks/disconnect_storm.py [--streams 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness import kefu_process, summary
from kefu.bench.sse import parse_events

VANISH_POINTS = ("mid-request", "after-request", "after-headers", "after-tokens")


@dataclass
class Conversation:
    index: int
    session_id: str | None = None
    done: list[str] = field(default_factory=list)  # replies whose `done` arrived, in order
    vanished: str | None = None  # where, if the client left


@dataclass
class Counts:
    streams: int = 0
    sent: int = 0  # turns sent (or begun)
    done: int = 0
    vanished: int = 0
    vanished_at: dict[str, int] = field(default_factory=dict)
    refused: int = 0  # answered with a non-200 (none expected here)
    unknown_session: int = 0  # vanished before the `meta` event named the session
    checked_sessions: int = 0
    lost: int = 0
    extra: int = 0
    kept_cut: int = 0  # the turn a client vanished in, stored as far as it went
    leaked: int = 0
    held_before: dict[str, Any] = field(default_factory=dict)
    held_after: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def request_bytes(port: int, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"POST /chat HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + payload


def vanish(writer: asyncio.StreamWriter, rng: random.Random) -> None:
    if rng.random() < 0.5:
        writer.transport.abort()  # RST: the peer is simply gone
    else:
        writer.close()  # FIN


async def one_turn(
    port: int, convo: Conversation, text: str, plan: str | None, rng: random.Random
) -> bool:
    """One turn; True if it got `done` (the conversation may go on)."""
    body: dict[str, Any] = {"message": text}
    if convo.session_id is not None:
        body["session_id"] = convo.session_id
    raw = request_bytes(port, body)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if plan == "mid-request":
            writer.write(raw[: rng.randrange(1, len(raw))])
            await writer.drain()
            convo.vanished = plan
            vanish(writer, rng)
            return False
        writer.write(raw)
        await writer.drain()
        if plan == "after-request":
            await asyncio.sleep(rng.random() * 0.05)
            convo.vanished = plan
            vanish(writer, rng)
            return False
        status_line = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # headers
        if plan == "after-headers":
            convo.vanished = plan
            vanish(writer, rng)
            return False
        if b" 200 " not in status_line:
            raise RuntimeError(f"refused: {status_line!r}")
        tokens_to_read = rng.randrange(1, 12) if plan == "after-tokens" else None
        return await read_events(reader, writer, convo, tokens_to_read, rng)
    finally:
        if not writer.is_closing():
            writer.close()


async def read_events(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    convo: Conversation,
    tokens_to_read: int | None,
    rng: random.Random,
) -> bool:
    """Read the chunked SSE body event by event; vanish after ``tokens_to_read`` tokens."""
    buffer = b""
    tokens = 0
    while True:
        size_line = await reader.readline()
        if not size_line:
            raise RuntimeError("the stream ended without `done`")
        size = int(size_line.strip() or b"0", 16)
        if size == 0:
            raise RuntimeError("the stream ended without `done`")
        buffer += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            for event in parse_events(frame.decode()):
                payload = json.loads(event.data)
                if event.event == "meta":
                    convo.session_id = payload["session_id"]
                elif event.event == "token":
                    tokens += 1
                    if tokens_to_read is not None and tokens >= tokens_to_read:
                        convo.vanished = "after-tokens"
                        vanish(writer, rng)
                        return False
                elif event.event == "done":
                    convo.done.append(payload["reply"])
                    return True
                elif event.event == "error":
                    raise RuntimeError(f"error event: {payload}")


async def conversation(
    port: int, convo: Conversation, counts: Counts, vanish_share: float, rng: random.Random
) -> None:
    for turn in range(rng.randint(1, 3)):
        plan = rng.choice(VANISH_POINTS) if rng.random() < vanish_share else None
        counts.sent += 1
        try:
            if await one_turn(port, convo, f"storm {convo.index} turn {turn}", plan, rng):
                counts.done += 1
                continue
        except RuntimeError:
            counts.refused += 1
            return
        counts.vanished += 1
        assert convo.vanished is not None
        counts.vanished_at[convo.vanished] = counts.vanished_at.get(convo.vanished, 0) + 1
        return


def open_sockets(pid: int) -> int:
    fds = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            count += fd.readlink().name.startswith("socket:")
    return count


def held(client: httpx.Client, pid: int) -> dict[str, Any]:
    state = client.get("/ready").json()
    return {
        "engine_running": state["engine"]["running"],
        "admission_running": state["admission"]["running"],
        "admission_waiting": state["admission"]["waiting"],
        "admission_reading": state["admission"]["reading"],
        **state["held"],
        "sockets": open_sockets(pid),
    }


def leaks(before: dict[str, Any], after: dict[str, Any]) -> int:
    """What is held after the storm beyond the idle levels before it."""
    zero = (
        "engine_running",
        "admission_running",
        "admission_waiting",
        "admission_reading",
        "session_locks",
    )
    total: int = sum(after[k] for k in zero) + after["pending_writes"]
    total += after["background_tasks"]
    return int(
        total
        + max(0, after["tasks"] - before["tasks"])
        + max(0, after["sockets"] - before["sockets"])
    )


async def wait_idle(client: httpx.Client, pid: int, before: dict[str, Any]) -> dict[str, Any]:
    """Give the server up to 15 s to settle (write-behind stores, closing sockets)."""
    deadline = time.monotonic() + 15
    while True:
        after = held(client, pid)
        if leaks(before, after) == 0 or time.monotonic() > deadline:
            return after
        await asyncio.sleep(0.2)


def check(client: httpx.Client, convos: list[Conversation], counts: Counts) -> None:
    for convo in convos:
        if convo.session_id is None:
            if convo.done:
                counts.lost += len(convo.done)  # done without a session id: impossible
            counts.unknown_session += 1
            continue
        counts.checked_sessions += 1
        response = client.get(f"/sessions/{convo.session_id}")
        if response.status_code == 404:
            counts.lost += len(convo.done)
            continue
        response.raise_for_status()
        replies = [m["content"] for m in response.json()["messages"] if m["role"] == "assistant"]
        kept = replies[: len(convo.done)]
        counts.lost += sum(a != b for a, b in zip(kept, convo.done, strict=False))
        counts.lost += max(0, len(convo.done) - len(kept))
        beyond = len(replies) - len(convo.done)
        if beyond > 0 and convo.vanished is not None:
            counts.kept_cut += 1
            beyond -= 1
        counts.extra += max(0, beyond)


async def storm(url: str, pid: int, args: argparse.Namespace) -> Counts:
    port = int(url.rsplit(":", 1)[1])
    counts = Counts(streams=args.streams)
    rng = random.Random(args.seed)
    with httpx.Client(base_url=url, timeout=30) as client:
        counts.held_before = held(client, pid)
    convos = [Conversation(i) for i in range(args.streams)]
    started = time.monotonic()
    await asyncio.gather(
        *(conversation(port, c, counts, args.vanish, random.Random(rng.random())) for c in convos)
    )
    counts.seconds = round(time.monotonic() - started, 2)
    with httpx.Client(base_url=url, timeout=30) as client:
        counts.held_after = await wait_idle(client, pid, counts.held_before)
        counts.leaked = leaks(counts.held_before, counts.held_after)
        check(client, convos, counts)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--streams", type=int, default=1000, help="conversations at once")
    parser.add_argument("--vanish", type=float, default=0.7, help="share of turns that vanish")
    parser.add_argument("--words", type=int, default=40, help="reply length in words")
    parser.add_argument("--token-delay", type=float, default=0.01, help="seconds per word")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.streams)), hard))
    flags = ["--engine", "fake", "--fake-reply-words", str(args.words)]
    flags += ["--fake-token-delay", str(args.token_delay), "--no-fast-path"]
    # Every conversation runs at once: admission must not be what turns them away.
    flags += ["--parallel", str(args.streams), "--max-queue", str(args.streams)]
    flags += ["--admission", "queue", "--auth", "none"]
    with kefu_process(*flags) as (url, process):
        counts = asyncio.run(storm(url, process.pid, args))
    print(
        f"disconnect storm: {counts.streams} conversations at once, {counts.seconds:g} s "
        f"(fake engine, {args.words} words {args.token_delay:g} s apart)"
    )
    print(f"{'sent':>6} {'done':>6} {'vanished':>8} {'lost':>5} {'extra':>5} {'leaked':>6}")
    print(
        f"{counts.sent:6} {counts.done:6} {counts.vanished:8} {counts.lost:5} "
        f"{counts.extra:5} {counts.leaked:6}"
    )
    print(f"vanished at: {counts.vanished_at}")
    print(
        f"sessions checked {counts.checked_sessions}, vanished before their id "
        f"{counts.unknown_session}, cut turns kept {counts.kept_cut}, refused {counts.refused}"
    )
    print(f"held before: {counts.held_before}")
    print(f"held after:  {counts.held_after}")
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(counts), indent=1))
    sys.exit(0)


if __name__ == "__main__":
    main()
