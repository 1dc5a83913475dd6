"""What kefu's HTTP layer adds over calling the engine directly, at many concurrent streams.

Both sides use the FakeEngine with the same delays (a model that costs nothing
to compute), so every difference is gateway: parsing, admission, timelines,
SSE framing, the socket. One run:

  direct  FakeEngine.generate() in this process, C concurrent streams
  kefu    `kefu serve --engine fake` with the same delays, C concurrent
          /v1/chat/completions streams from this process (httpx)

Printed: TTFT and E2E p50/p99 of each, the difference (the overhead a client
sees, client parsing included), and kefu's own server-side figure from /stats:
gateway_ms = E2E less queue, prefill and decode, which no client cost inflates.
DESIGN's target: p50 < 1 ms, p99 < 5 ms at 64 concurrent streams.

    .venv/bin/python benchmarks/gateway_overhead.py [--streams 64] [--requests 4]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import httpx

from harness import kefu_server, percentile, trace_chat
from kefu.engine.base import ChatMessage, GenerationRequest, SamplingParams, TokenDelta
from kefu.engine.fake import FakeEngine


async def direct(args: argparse.Namespace) -> tuple[list[float], list[float]]:
    engine = FakeEngine(
        token_delay=args.token_delay, prefill_delay=args.prefill_delay, reply_words=args.words
    )
    await engine.start()
    ttft: list[float] = []
    e2e: list[float] = []
    request = GenerationRequest(
        [ChatMessage("user", "Where is my parcel?")], SamplingParams(max_tokens=args.words)
    )

    async def stream() -> None:
        for _ in range(args.requests):
            sent = time.perf_counter()
            first = None
            async for event in engine.generate(request):
                if isinstance(event, TokenDelta) and first is None:
                    first = time.perf_counter()
            ttft.append(((first or time.perf_counter()) - sent) * 1000)
            e2e.append((time.perf_counter() - sent) * 1000)

    await asyncio.gather(*(stream() for _ in range(args.streams)))
    return ttft, e2e


async def through_kefu(
    url: str, args: argparse.Namespace
) -> tuple[list[float], list[float], int, dict[str, Any]]:
    ttft: list[float] = []
    e2e: list[float] = []
    errors = 0
    body = {
        "messages": [{"role": "user", "content": "Where is my parcel?"}],
        "max_tokens": args.words,
        "stream": True,
    }
    limits = httpx.Limits(max_connections=args.streams + 4)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        # Warm-up: open every connection first, as a long-running client would have them.
        await asyncio.gather(*(trace_chat(client, url, body) for _ in range(args.streams)))

        async def stream() -> None:
            nonlocal errors
            for _ in range(args.requests):
                trace = await trace_chat(client, url, body)
                if trace.error or trace.first is None:
                    errors += 1
                    continue
                ttft.append((trace.first - trace.sent) * 1000)
                e2e.append((trace.end - trace.sent) * 1000)

        started = time.time()
        await asyncio.gather(*(stream() for _ in range(args.streams)))
        window = time.time() - started + 1
        stats = (await client.get(url + "/stats", params={"window": window})).json()
    return ttft, e2e, errors, stats


def row(name: str, ttft: list[float], e2e: list[float]) -> str:
    return (
        f"{name:<8} TTFT p50 {percentile(ttft, 50):7.2f}  p99 {percentile(ttft, 99):7.2f}   "
        f"E2E p50 {percentile(e2e, 50):8.2f}  p99 {percentile(e2e, 99):8.2f}   n={len(e2e)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=64, help="concurrent streams")
    parser.add_argument("--requests", type=int, default=4, help="requests per stream")
    parser.add_argument("--words", type=int, default=32, help="reply length in tokens")
    parser.add_argument("--token-delay", type=float, default=0.02, help="seconds per token")
    parser.add_argument("--prefill-delay", type=float, default=0.05, help="seconds to 1st token")
    args = parser.parse_args()

    d_ttft, d_e2e = asyncio.run(direct(args))
    flags = [
        "--engine", "fake", "--fake-token-delay", str(args.token_delay),
        "--fake-prefill-delay", str(args.prefill_delay), "--fake-reply-words", str(args.words),
        "--parallel", str(args.streams), "--max-queue", str(args.streams * 2),
    ]  # fmt: skip
    with kefu_server(*flags) as url:
        k_ttft, k_e2e, errors, stats = asyncio.run(through_kefu(url, args))

    print(
        f"{args.streams} concurrent streams x {args.requests} requests, {args.words} tokens, "
        f"{args.token_delay * 1000:g} ms/token, {args.prefill_delay * 1000:g} ms prefill (ms)\n"
    )
    print(row("direct", d_ttft, d_e2e))
    print(row("kefu", k_ttft, k_e2e) + f"  errors={errors}")
    for q in (50, 99):
        print(
            f"client-seen overhead p{q}: TTFT +{percentile(k_ttft, q) - percentile(d_ttft, q):.2f}"
            f" ms, E2E +{percentile(k_e2e, q) - percentile(d_e2e, q):.2f} ms"
        )
    for name, key in (
        ("gateway time (E2E less queue, prefill, decode)", "gateway_ms"),
        ("TTFT", "ttft_ms"),
        ("queue wait", "queue_ms"),
    ):
        figures = stats[key]
        print(
            f"kefu server-side {name}: p50 {figures['p50']} ms, p95 {figures['p95']} ms, "
            f"p99 {figures['p99']} ms"
        )


if __name__ == "__main__":
    main()
