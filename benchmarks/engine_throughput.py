"""kefu's /v1/chat/completions against llama-cpp-python's own server, same model, same machine.

One run measures, at concurrency 1, 4, 8 and 16 (each client sends its requests
back to back): aggregate output tokens/s, TTFT and E2E p50/p99, errors. The
servers run one after the other, never competing for the cores. Also printed:
kefu's scaling (tokens/s at 8 / at 1), /health latency while 8 streams decode
(is the event loop free?), and the prefill time that prefix reuse saves
(kefu with --prefix-cache 0). Output tokens are counted by re-tokenising each
reply with the model's tokenizer, the same way for both servers.

    .venv/bin/python benchmarks/engine_throughput.py [--levels 1,4,8,16] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field

import httpx

from harness import StreamResult, kefu_server, llama_cpp_server, percentile, stream_chat
from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.model import LlamaModel

PERSONA = (
    "You are a friendly, concise customer-service assistant for an online shop. "
    "Answer in the customer's language, in a few sentences."
)
QUESTIONS = [
    "Where is my parcel? I ordered it last Monday.",
    "How do I return a pair of shoes that do not fit?",
    "Can I change the delivery address of my order?",
    "How long does a refund take?",
    "Do you ship to Canada, and how much does it cost?",
    "I received a damaged item. What should I do?",
    "How do I get an invoice for my order?",
    "Can I pay with a gift card?",
]


@dataclass
class Level:
    concurrency: int
    wall: float
    results: list[StreamResult]
    tokens: int
    health_ms: list[float] = field(default_factory=list)

    @property
    def ok(self) -> list[StreamResult]:
        return [r for r in self.results if r.error is None]

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall if self.wall else 0.0

    def ms(self, attr: str, q: float) -> float:
        return percentile([getattr(r, attr) for r in self.ok], q) * 1000


async def run_level(
    url: str,
    concurrency: int,
    requests_per_client: int,
    max_tokens: int,
    count_tokens: LlamaModel,
    probe_path: str | None,
) -> Level:
    results: list[StreamResult] = []
    health: list[float] = []
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def customer(index: int) -> None:
            for turn in range(requests_per_client):
                question = QUESTIONS[(index + turn) % len(QUESTIONS)]
                messages = [
                    {"role": "system", "content": PERSONA},
                    {"role": "user", "content": question},
                ]
                results.append(await stream_chat(client, url, messages, max_tokens=max_tokens))

        async def probe(stop: asyncio.Event) -> None:
            while not stop.is_set():
                sent = time.perf_counter()
                await client.get(url + (probe_path or "/health"))
                health.append((time.perf_counter() - sent) * 1000)
                await asyncio.sleep(0.05)

        stop = asyncio.Event()
        prober = asyncio.create_task(probe(stop)) if probe_path else None
        started = time.perf_counter()
        await asyncio.gather(*(customer(i) for i in range(concurrency)))
        wall = time.perf_counter() - started
        stop.set()
        if prober:
            await prober
    tokens = sum(len(count_tokens.tokenize(r.text)) for r in results if r.error is None)
    return Level(concurrency, wall, results, tokens, health)


async def bench_server(
    url: str, levels: list[int], args: argparse.Namespace, model: LlamaModel, probe: str
) -> dict[int, Level]:
    # Warm-up: the first request of a fresh server pays one-off costs.
    async with httpx.AsyncClient(timeout=120) as client:
        await stream_chat(client, url, [{"role": "user", "content": "Hi"}], max_tokens=8)
    out = {}
    for c in levels:
        per_client = max(args.min_requests // c, 2)
        out[c] = await run_level(
            url, c, per_client, args.max_tokens, model, probe if c == 8 else None
        )
        print(f"  {describe(out[c])}", flush=True)
    return out


def describe(level: Level) -> str:
    errors = len(level.results) - len(level.ok)
    return (
        f"c={level.concurrency:<3} {level.tokens_per_s:7.1f} tok/s  "
        f"TTFT p50 {level.ms('ttft', 50):7.0f} p99 {level.ms('ttft', 99):7.0f} ms  "
        f"E2E p50 {level.ms('e2e', 50):7.0f} p99 {level.ms('e2e', 99):7.0f} ms  "
        f"n={len(level.results)} errors={errors} tokens={level.tokens} wall={level.wall:.1f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,4,8,16", help="concurrency levels, comma-separated")
    parser.add_argument("--max-tokens", type=int, default=64, help="output tokens per request")
    parser.add_argument(
        "--min-requests", type=int, default=16, help="requests per level (at least 2 per client)"
    )
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for both engines")
    parser.add_argument(
        "--kefu-only", action="store_true", help="skip the baselines (for quick iterations)"
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    model_path = bundled_model_path()
    tokenizer = LlamaModel(model_path)

    print(f"model {model_path.name}, {args.max_tokens} output tokens per request\n")
    print("kefu serve (continuous batching, prefix reuse)")
    with kefu_server("--threads", str(args.threads), "--parallel", "8") as url:
        kefu = asyncio.run(bench_server(url, levels, args, tokenizer, "/health"))
        stats = httpx.get(url + "/ready").json()["engine"]
    if args.kefu_only:
        return
    print("kefu serve --prefix-cache 0 (no prefix reuse)")
    with kefu_server("--threads", str(args.threads), "--prefix-cache", "0") as url:
        no_reuse = asyncio.run(bench_server(url, [1, 8], args, tokenizer, "/health"))
    print("python -m llama_cpp.server (llama-cpp-python 0.3.36, AMX fix only)")
    with llama_cpp_server(model_path, threads=args.threads) as url:
        baseline = asyncio.run(bench_server(url, levels, args, tokenizer, "/v1/models"))

    print(
        "\n| concurrency | kefu tok/s | llama_cpp.server tok/s | ratio | kefu TTFT p99 ms "
        "| server TTFT p99 ms | kefu E2E p99 ms | server E2E p99 ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for c in levels:
        k, b = kefu[c], baseline[c]
        ratio = k.tokens_per_s / b.tokens_per_s if b.tokens_per_s else float("nan")
        print(
            f"| {c} | {k.tokens_per_s:.1f} | {b.tokens_per_s:.1f} | {ratio:.2f}x "
            f"| {k.ms('ttft', 99):.0f} | {b.ms('ttft', 99):.0f} "
            f"| {k.ms('e2e', 99):.0f} | {b.ms('e2e', 99):.0f} |"
        )
    if 1 in kefu and 8 in kefu:
        print(f"\nkefu scaling: {kefu[8].tokens_per_s / kefu[1].tokens_per_s:.2f}x tok/s at 8 vs 1")
    if 8 in kefu:
        h, hb = kefu[8].health_ms, baseline[8].health_ms
        print(
            f"kefu /health while 8 streams decode: p50 {percentile(h, 50):.1f} ms, "
            f"p99 {percentile(h, 99):.1f} ms, max {max(h, default=0):.1f} ms (n={len(h)})"
        )
        print(
            f"llama_cpp.server /v1/models meanwhile: p50 {percentile(hb, 50):.1f} ms, "
            f"p99 {percentile(hb, 99):.1f} ms, max {max(hb, default=0):.1f} ms"
        )
    for c in (1, 8):
        if c in kefu:
            saved = no_reuse[c].ms("ttft", 50) - kefu[c].ms("ttft", 50)
            print(
                f"prefix reuse at c={c}: TTFT p50 {kefu[c].ms('ttft', 50):.0f} ms vs "
                f"{no_reuse[c].ms('ttft', 50):.0f} ms without (saves {saved:.0f} ms); "
                f"tok/s {kefu[c].tokens_per_s:.1f} vs {no_reuse[c].tokens_per_s:.1f}"
            )
    hit = stats["prefix_reused_tokens"] / max(stats["prompt_tokens"], 1)
    print(
        f"kefu prefix cache: {stats['prefix_hits']}/{stats['prefix_lookups']} prompts reused KV, "
        f"{stats['prefix_reused_tokens']}/{stats['prompt_tokens']} prompt tokens ({hit:.0%})"
    )


if __name__ == "__main__":
    main()
