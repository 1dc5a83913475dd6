"""The cost of auth + limits on the request path: none vs in-process vs Redis, one run.

Three `kefu serve --engine fake` servers in turn, the same cheap route (non-streamed
/v1/chat/completions, a one-word reply, no fast path), C concurrent clients:

  none      --auth none: no key, no limit (the loopback default)
  local     --auth keys, limits in process (token bucket + stream cap)
  redis     --auth keys --redis: keys and limits in a redis-server on loopback
            (one Lua script per check)

Printed: client-seen latency p50/p99 of each and its difference from `none`; the
throughput of each and the service time per request it implies, against `none` (at
saturation, what auth + limits cost the server's CPU); and the server's own figure,
read from each request's timeline in the access log: received to `limited`
(authentication and the limit check). With Redis that wait includes the round trip
and whatever else the event loop runs meanwhile, so under saturation it measures
the loop's queue as much as Redis.
The buckets are large enough that nothing is refused. Issue 19's target: under
0.3 ms p50 and 2 ms p99 added with Redis on loopback at 64 concurrent clients.

    .venv/bin/python benchmarks/limits.py [--clients 64] [--requests 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from harness import free_port, percentile, wait_until

BODY = {"messages": [{"role": "user", "content": "Where is my parcel?"}], "max_tokens": 4}


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    port = free_port()
    command = [
        shutil.which("redis-server") or "/usr/bin/redis-server",
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
        "--save", "", "--appendonly", "no",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while (
            subprocess.run(
                ["redis-cli", "-p", str(port), "ping"], capture_output=True, check=False
            ).stdout.strip()
            != b"PONG"
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        process.wait()


def make_key(data_dir: Path, redis: str | None) -> str:
    where = ["--redis", redis] if redis else ["--data-dir", str(data_dir)]
    created = subprocess.run(
        [sys.executable, "-m", "kefu", "keys", "create", "--name", "bench", *where,
         "--rate-limit", "100000000/60", "--max-streams", "1000"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return created.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def kefu(workdir: Path, name: str, flags: list[str]) -> Iterator[tuple[str, Path]]:
    port = free_port()
    data_dir = workdir / name
    data_dir.mkdir()
    log = workdir / f"{name}.log"
    command = [
        sys.executable, "-m", "kefu", "serve", "--port", str(port), "--data-dir", str(data_dir),
        "--engine", "fake", "--fake-reply-words", "1", "--no-fast-path", "--no-warmup",
        "--parallel", "64", "--max-queue", "256", *flags,
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until(url + "/ready", log)
            yield url, log
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)


async def load(
    url: str, key: str | None, args: argparse.Namespace
) -> tuple[list[float], int, float]:
    """Latencies (ms), errors, and requests per second over the measured phase."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=args.clients + 4)
    async with httpx.AsyncClient(timeout=60, limits=limits, headers=headers) as client:

        async def one() -> float:
            sent = time.perf_counter()
            response = await client.post(url + "/v1/chat/completions", json=BODY)
            if response.status_code != 200:
                raise RuntimeError(f"{response.status_code}: {response.text}")
            return (time.perf_counter() - sent) * 1000

        await asyncio.gather(*(one() for _ in range(args.clients)))  # open the connections

        async def client_loop() -> None:
            nonlocal errors
            for _ in range(args.requests):
                try:
                    latencies.append(await one())
                except (RuntimeError, httpx.HTTPError):
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(client_loop() for _ in range(args.clients)))
        rate = args.clients * args.requests / (time.perf_counter() - started)
    return latencies, errors, rate


def server_side(log: Path, skip: int) -> list[float]:
    """Received to `limited` (auth + limits) of each measured /v1 request (the first
    ``skip`` opened the connections), from the access log."""
    figures = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        timings = record.get("timings", {})
        if record.get("route") == "/v1/chat/completions" and "limited_at_ms" in timings:
            figures.append(timings["limited_at_ms"])
    return figures[skip:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients")
    parser.add_argument("--requests", type=int, default=20, help="requests per client")
    args = parser.parse_args()
    results: dict[str, tuple[list[float], int, float, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="kefu-limits-") as tmp:
        workdir = Path(tmp)
        with redis_server(workdir) as redis:
            configs: list[tuple[str, list[str], str | None]] = [
                ("none", ["--auth", "none"], None),
                ("local", ["--auth", "keys"], None),
                ("redis", ["--auth", "keys", "--redis", redis], redis),
            ]
            for name, flags, redis_url in configs:
                with kefu(workdir, name, flags) as (url, log):
                    key = make_key(workdir / name, redis_url) if name != "none" else None
                    latencies, errors, rate = asyncio.run(load(url, key, args))
                results[name] = (latencies, errors, rate, server_side(log, args.clients))

    print(
        f"{args.clients} concurrent clients x {args.requests} requests, non-streamed "
        "/v1/chat/completions, one-word replies (ms)\n"
    )
    base50 = percentile(results["none"][0], 50)
    base99 = percentile(results["none"][0], 99)
    base_rate = results["none"][2]
    for name, (latencies, errors, rate, server) in results.items():
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        line = (
            f"{name:<6} client p50 {p50:6.2f}  p99 {p99:6.2f}   added vs none: "
            f"p50 {p50 - base50:+6.2f}  p99 {p99 - base99:+6.2f}   n={len(latencies)} "
            f"errors={errors}\n"
            f"       throughput {rate:7.1f} req/s: service time per request "
            f"{1000 / rate - 1000 / base_rate:+.3f} ms vs none"
        )
        if server:
            line += (
                f"\n       server-side auth + limits (received -> limited): "
                f"p50 {percentile(server, 50):.3f}  p99 {percentile(server, 99):.3f}  "
                f"n={len(server)}"
            )
        print(line)


if __name__ == "__main__":
    main()
