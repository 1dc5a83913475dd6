"""Soak (issue 23 item 5): --minutes of mixed traffic against `kefu serve` on the real
model, sampling the server every --sample-seconds: RSS, open file descriptors, threads,
the SQLite files' size, and event-loop lag; each row printed as it is taken (a run cut
short keeps its table), then the slopes after warm-up.

Warm-up: half the run, at most 15 minutes (--warmup-minutes). The /stats window keeps 15
minutes of answered requests (about 1 KB each), so RSS rises that long at any steady rate
by design; a slope fitted from the first minute on (this script's first version) counted
that as growth. A 10-minute run fits minutes 5-10, whose window is still filling: only a
run past 15 minutes of warm-up measures the steady state alone.

Traffic, all at once, each kind from its own clients:
  fast      /chat conversations of FAQ questions (the fast path answers), then DELETE
            of the session, one in two
  llm       /chat conversations the LLM answers (general questions)
  leave     /chat LLM turns whose client closes the stream after the first token
  v1        /v1/chat/completions, streamed and not, a few tokens each
  kb        POST /kb/import of a small CSV every 30 s (a rotating set of 5 x 4
            entries, so the knowledge base stays bounded)
Event-loop lag: the time GET /health takes, probed every 100 ms (the loop answers it
at once when free; on loopback the rest is noise). Errors: every answer but 2xx, and a
503 from admission (overloaded, queue_full, queue_timeout: the server saying "busy",
counted apart); a 409 session_busy would be an error too (one client per session).

Target (issue 23): RSS and fds flat after warm-up (slope under 1 MB per 10 min), no
error other than admission 503s. A few minutes cannot show a slope that small against
noise; the figure printed is what was measured.

    .venv/bin/python benchmarks/soak.py --minutes 30 [--sample-seconds 60] [--json out.json]
        [--tracemalloc DIR]   (the server under tracemalloc: what grew, see traced_serve.py)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness import kefu_process, percentile, sse_events, summary
from kefu.bench.sse import parse_events

FAQ = (
    "How long does delivery take?",
    "What is your return policy?",
    "Do you ship abroad?",
    "How can I pay?",
    "Hello!",
)
GENERAL = (
    "Can you suggest a gift for someone who likes reading in bed?",
    "Tell me something about caring for a wooden table.",
    "Which colours go well with a grey sofa?",
    "Write one sentence about autumn evenings at home.",
)
ADMISSION_CODES = ("overloaded", "queue_full", "queue_timeout")
# The /stats window keeps 15 minutes of answered requests (observe/window.py): the
# bounded structure slowest to fill, so RSS rises that long at any steady rate.
WINDOW_FILL_MINUTES = 15.0
DRAIN_SECONDS = 180.0


@dataclass
class Sample:
    at_s: float
    requests: int
    errors: int
    busy: int
    rss_mib: float
    fds: int
    threads: int
    sqlite_mib: float
    lag_p50_ms: float
    lag_p99_ms: float


@dataclass
class Soak:
    minutes: float
    warmup_minutes: float
    samples: list[Sample] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)  # by kind
    errors: Counter[str] = field(default_factory=Counter)  # "kind status code"
    busy: Counter[str] = field(default_factory=Counter)  # admission refusals, by code
    rss_slope_mib_per_10min: float = 0.0
    fds_slope_per_10min: float = 0.0
    threads_max: int = 0
    fds_after_warmup_max_rise: int = 0
    cut_at_end: int = 0  # clients still waiting for an answer DRAIN_SECONDS after the end

    def total(self) -> tuple[int, int, int]:
        return sum(self.requests.values()), sum(self.errors.values()), sum(self.busy.values())


def proc_status(pid: int) -> tuple[float, int]:
    rss, threads = float("nan"), 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


def open_fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def sqlite_mib(data_dir: Path) -> float:
    files = [*data_dir.glob("*.db"), *data_dir.glob("*.db-wal"), *data_dir.glob("*.db-shm")]
    return sum(f.stat().st_size for f in files if f.exists()) / 2**20


def slope_per_10min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope, per 10 minutes."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return 0.0 if sxx == 0 else sxy / sxx * 600


class Traffic:
    def __init__(self, client: httpx.AsyncClient, soak: Soak, rng: random.Random) -> None:
        self.client = client
        self.soak = soak
        self.rng = rng

    def error(self, key: str) -> None:
        if key not in self.soak.errors:  # as it comes: a run cut short still says what
            print(f"first error: {key}", flush=True)
        self.soak.errors[key] += 1

    def account(self, kind: str, response: httpx.Response, body: bytes) -> bool:
        """Count the answer; True when it was a success."""
        self.soak.requests[kind] += 1
        if 200 <= response.status_code < 300:
            return True
        code = error_code(body)
        if response.status_code == 503 and code in ADMISSION_CODES:
            self.soak.busy[code] += 1
        else:
            self.error(f"{kind} {response.status_code} {code}")
        return False

    async def chat_turn(
        self, kind: str, message: str, session_id: str | None, *, leave: bool = False
    ) -> str | None:
        body: dict[str, Any] = {"message": message}
        if session_id is not None:
            body["session_id"] = session_id
        try:
            async with self.client.stream("POST", "/chat", json=body) as response:
                if response.status_code != 200:
                    self.account(kind, response, await response.aread())
                    return session_id
                async with contextlib.aclosing(sse_events(response)) as events:
                    async for event in events:
                        data = json.loads(event.data)
                        if event.event == "meta":
                            session_id = data["session_id"]
                        elif event.event == "token" and leave:
                            break  # the customer closes the page mid-reply
                        elif event.event == "error":
                            self.error(f"{kind} error-event {data['error']['code']}")
                self.soak.requests[kind] += 1
        except httpx.HTTPError as exc:
            self.error(f"{kind} {type(exc).__name__}")
        return session_id

    async def conversations(self, kind: str, messages: tuple[str, ...], stop: float) -> None:
        while time.monotonic() < stop:
            session_id = None
            for _ in range(self.rng.randint(1, 4)):
                if time.monotonic() >= stop:
                    break
                session_id = await self.chat_turn(kind, self.rng.choice(messages), session_id)
                await asyncio.sleep(self.rng.uniform(0.2, 1.0))
            if session_id is not None and kind == "fast" and self.rng.random() < 0.5:
                response = await self.client.delete(f"/sessions/{session_id}")
                self.account("delete", response, response.content)

    async def leavers(self, stop: float) -> None:
        while time.monotonic() < stop:
            await self.chat_turn("leave", self.rng.choice(GENERAL), None, leave=True)
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))

    async def v1(self, stop: float) -> None:
        while time.monotonic() < stop:
            stream = self.rng.random() < 0.5
            body = {
                "messages": [{"role": "user", "content": self.rng.choice(GENERAL)}],
                "max_tokens": 8,
                "stream": stream,
            }
            try:
                async with self.client.stream(
                    "POST", "/v1/chat/completions", json=body
                ) as response:
                    self.account("v1", response, await response.aread())
            except httpx.HTTPError as exc:
                self.error(f"v1 {type(exc).__name__}")
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))

    async def kb_imports(self, stop: float) -> None:
        batch = 0
        while time.monotonic() < stop:
            rows = ["question,answer"] + [
                f'"Soak question {batch % 5}-{i}: is item {i} in stock?",'
                f'"Soak answer {batch % 5}-{i}: yes, item {i} ships within two days."'
                for i in range(4)
            ]
            response = await self.client.post(
                "/kb/import", params={"filename": "soak.csv"}, content="\n".join(rows).encode()
            )
            self.account("kb", response, response.content)
            batch += 1
            await asyncio.sleep(max(0.0, min(30.0, stop - time.monotonic())))


def error_code(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    if text.startswith("event:"):  # /chat's busy answer
        text = next((event.data for event in parse_events(text)), "{}")
    try:
        return str(json.loads(text)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "?"


async def lag_probe(url: str, stop: float, lags: list[float]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        while time.monotonic() < stop:
            started = time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                await client.get("/health")
                lags.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.1)


async def sampler(
    pid: int,
    data_dir: Path,
    soak: Soak,
    stop: float,
    every: float,
    lags: list[float],
    trace_after: float | None,
) -> None:
    started = time.monotonic()
    while True:
        await asyncio.sleep(every)
        if trace_after is not None and time.monotonic() - started >= trace_after:
            os.kill(pid, signal.SIGUSR1)  # traced_serve.py: a snapshot (the first: baseline)
        rss, threads = proc_status(pid)
        window, lags[:] = list(lags), []
        requests, errors, busy = soak.total()
        sample = Sample(
            at_s=round(time.monotonic() - started, 1),
            requests=requests,
            errors=errors,
            busy=busy,
            rss_mib=round(rss, 1),
            fds=open_fds(pid),
            threads=threads,
            sqlite_mib=round(sqlite_mib(data_dir), 2),
            lag_p50_ms=round(percentile(window, 50), 1),
            lag_p99_ms=round(percentile(window, 99), 1),
        )
        soak.samples.append(sample)
        print(row(sample), flush=True)  # as it comes: a run cut short keeps its table
        if time.monotonic() >= stop:
            return


def row(s: Sample) -> str:
    return (
        f"{s.at_s:6.0f} {s.requests:6} {s.errors:6} {s.busy:5} {s.rss_mib:8.1f} {s.fds:4} "
        f"{s.threads:7} {s.sqlite_mib:10.2f} {s.lag_p50_ms:7.1f} {s.lag_p99_ms:7.1f}"
    )


HEADER = (
    f"{'t (s)':>6} {'reqs':>6} {'errors':>6} {'busy':>5} {'RSS MiB':>8} {'fds':>4} "
    f"{'threads':>7} {'SQLite MiB':>10} {'lag p50':>7} {'lag p99':>7}"
)


async def run(url: str, pid: int, data_dir: Path, args: argparse.Namespace, warmup: float) -> Soak:
    soak = Soak(minutes=args.minutes, warmup_minutes=warmup)
    stop = time.monotonic() + args.minutes * 60
    rng = random.Random(args.seed)
    lags: list[float] = []
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        traffic = Traffic(client, soak, rng)
        work = [traffic.conversations("fast", FAQ, stop) for _ in range(args.fast_clients)]
        work += [traffic.conversations("llm", GENERAL, stop) for _ in range(args.llm_clients)]
        work += [traffic.leavers(stop), traffic.v1(stop), traffic.kb_imports(stop)]
        trace_after = warmup * 60 if args.tracemalloc is not None else None
        tasks = [asyncio.create_task(w) for w in [*work, lag_probe(url, stop, lags)]]
        await sampler(pid, data_dir, soak, stop, args.sample_seconds, lags, trace_after)
        # In-flight requests may finish; one still going after DRAIN_SECONDS is cut (and
        # counted): on a loaded box the last LLM turns kept a 10-minute run going for 4
        # more minutes, until `timeout` killed it before it printed its summary.
        _, pending = await asyncio.wait(tasks, timeout=DRAIN_SECONDS)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        soak.cut_at_end = len(pending)
    steady = [s for s in soak.samples if s.at_s >= warmup * 60] or soak.samples
    soak.rss_slope_mib_per_10min = round(slope_per_10min([(s.at_s, s.rss_mib) for s in steady]), 2)
    soak.fds_slope_per_10min = round(slope_per_10min([(s.at_s, s.fds) for s in steady]), 2)
    soak.threads_max = max(s.threads for s in soak.samples)
    soak.fds_after_warmup_max_rise = max(s.fds for s in steady) - steady[0].fds
    return soak


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--sample-seconds", type=float, default=60.0)
    parser.add_argument("--fast-clients", type=int, default=6)
    parser.add_argument("--llm-clients", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=48, help="/chat reply cap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the samples here")
    parser.add_argument(
        "--warmup-minutes",
        type=float,
        help="samples before this are not in the slopes (default: half the run, at most 15 "
        "min, the span of the /stats window, the slowest bounded structure to fill)",
    )
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        metavar="DIR",
        help="run the server under tracemalloc (traced_serve.py): a snapshot per sample "
        "from the warm-up's end on, the growth since the first written to DIR",
    )
    args = parser.parse_args()
    # `timeout` sends SIGTERM: exit through the `with` below, which stops the server
    # (by default Python dies at once and leaves it running).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    warmup = args.warmup_minutes
    if warmup is None:
        warmup = min(WINDOW_FILL_MINUTES, args.minutes / 2)
    flags = ["--auth", "none", "--max-tokens", str(args.max_tokens), "--threads", "2"]
    launcher: tuple[str, ...] = ("-m", "kefu")
    if args.tracemalloc is not None:
        launcher = (str(Path(__file__).with_name("traced_serve.py")), str(args.tracemalloc))
    with (
        tempfile.TemporaryDirectory(prefix="kefu-soak-") as tmp,
        kefu_process(*flags, data_dir=Path(tmp), ready_timeout=600, launcher=launcher) as (
            url,
            process,
        ),
    ):
        print(
            f"soak: {args.minutes:g} min of mixed traffic, sampled every "
            f"{args.sample_seconds:g} s, slopes after {warmup:g} min of warm-up",
            flush=True,
        )
        print(HEADER, flush=True)
        soak = asyncio.run(run(url, process.pid, Path(tmp), args, warmup))
    requests, errors, busy = soak.total()
    print(
        f"after warm-up: RSS slope {soak.rss_slope_mib_per_10min:+.2f} MiB/10 min, fds slope "
        f"{soak.fds_slope_per_10min:+.2f}/10 min (largest rise {soak.fds_after_warmup_max_rise})"
        f", threads at most {soak.threads_max}; {soak.cut_at_end} clients cut at the end"
    )
    print(f"requests {requests} by kind {dict(soak.requests)}")
    print(f"admission 503s {busy} {dict(soak.busy)}; errors {errors} {dict(soak.errors)}")
    if args.json is not None:
        # Not asdict(soak): it rebuilds a Counter from (key, value) pairs, counting the pairs.
        data = {name: getattr(soak, name) for name in soak.__dataclass_fields__}
        data["samples"] = [asdict(s) for s in soak.samples]
        args.json.write_text(json.dumps(data, indent=1))
    sys.exit(0)


if __name__ == "__main__":
    main()
