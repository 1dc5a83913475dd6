"""Do kept conversations slow everyone's decoding? The same 8 ``/v1`` streams on one kefu
server, before and after it has kept the KV of many long conversations, in one run.

Each round on one fresh ``kefu serve`` (bundled model, defaults but ``--admission queue``,
so nothing is refused): a warm-up of 16 replies, then 8 concurrent streams of 64-token
replies to short questions (output tokens/s, each reply re-tokenised); then
``--conversations`` long conversations (about ``--words`` words each, one token of reply)
that the engine keeps; then the same 8 streams again. It prints both rates, their ratio
(1.0: kept prefixes cost nothing), and the prefix cache's figures from /ready.

    .venv/bin/python benchmarks/kept_prefixes.py [--rounds 2] [--conversations 24]

With one unified KV pool, attention spans every used cell, kept or not (a pool full of
kept conversations slowed decoding by 60 %); with a KV stream per slot and host copies,
a decode attends over its own stream only.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics

import httpx

from admission import one_stream, question_body
from harness import kefu_process, summary
from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.model import LlamaModel

WORDS = [
    *("order", "parcel", "refund", "delivery", "address", "invoice", "shoes", "size"),
    *("colour", "warehouse", "courier", "tracking", "number", "weekend", "store", "card"),
    *("payment", "voucher", "return", "label", "damaged", "box", "customer", "service"),
    *("opening", "hours", "discount", "member", "points", "exchange", "receipt"),
]


async def streams_rate(url: str, model: LlamaModel, clients: int, total: int) -> float:
    """Output tokens/s of ``total`` 64-token replies over ``clients`` concurrent streams."""
    rng = random.Random(total)
    queue = list(range(total))
    texts: list[str] = []

    async def client_loop(client: httpx.AsyncClient) -> None:
        while queue:
            queue.pop()
            request = await one_stream(client, url, question_body(rng))
            if request.status != 200 or request.first is None:
                raise SystemExit(f"a stream failed: {request.status} {request.code}")
            texts.append(request.text)

    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(timeout=300) as client:
        started = loop.time()
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
        wall = loop.time() - started
    return sum(len(model.tokenize(text)) for text in texts) / wall


async def keep_conversations(url: str, count: int, words: int, seed: int) -> None:
    """``count`` long conversations, four at a time, each answered with one token."""
    rng = random.Random(seed)

    async def one(client: httpx.AsyncClient, index: int) -> None:
        story = " ".join(rng.choice(WORDS) for _ in range(words))
        body = {
            "model": "bench",
            "messages": [
                {"role": "user", "content": f"Conversation {index}: {story}"},
                {"role": "assistant", "content": "I see. What would you like me to do?"},
                {"role": "user", "content": "Please summarise my case."},
            ],
            "max_tokens": 1,
        }
        response = await client.post(f"{url}/v1/chat/completions", json=body)
        response.raise_for_status()

    async with httpx.AsyncClient(timeout=300) as client:
        for start in range(0, count, 4):
            await asyncio.gather(*(one(client, i) for i in range(start, min(count, start + 4))))


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--rounds", type=int, default=2, help="fresh servers, one after another")
    parser.add_argument("--conversations", type=int, default=24, help="long ones kept")
    parser.add_argument("--words", type=int, default=450, help="words in each")
    parser.add_argument("--streams", type=int, default=8, help="concurrent /v1 streams")
    parser.add_argument("--requests", type=int, default=48, help="replies each time")
    args = parser.parse_args()
    model = LlamaModel(bundled_model_path())
    ratios = []
    print(f"{'round':>5} {'empty tok/s':>11} {'kept tok/s':>10} {'ratio':>6}  prefix cache")
    for round_ in range(args.rounds):
        with kefu_process("--admission", "queue", ready_timeout=600) as (url, _):
            asyncio.run(streams_rate(url, model, args.streams, 2 * args.streams))  # warm-up
            empty = asyncio.run(streams_rate(url, model, args.streams, args.requests))
            asyncio.run(keep_conversations(url, args.conversations, args.words, round_))
            kept = asyncio.run(streams_rate(url, model, args.streams, args.requests))
            engine = httpx.get(f"{url}/ready", timeout=10).json()["engine"]
        ratios.append(kept / empty)
        cache = (
            f"{engine['prefix_cache_entries']} entries, {engine['prefix_cache_tokens']} "
            f"tokens, {engine['prefix_hits']} hits of {engine['prefix_lookups']}, "
            f"{engine.get('prefix_restores', '-')} from host copies"
        )
        print(f"{round_ + 1:5} {empty:11.1f} {kept:10.1f} {kept / empty:6.2f}  {cache}", flush=True)
    print(f"\nkept / empty tok/s: mean {statistics.mean(ratios):.2f} over {len(ratios)} rounds")


if __name__ == "__main__":
    main()
