"""What the fast path buys under load: kefu with it against kefu sending everything to the LLM.

Starts ``kefu serve`` with the real engine (the bundled model) on a fresh data dir, then
``--clients`` simulated customers for ``--duration`` seconds. Each customer repeatedly
picks a message (by default 60 % fast-path material: demo-KB questions and paraphrases,
order status with demo order numbers, small talk; 40 % general questions for the LLM),
posts it to ``/chat`` as the first turn of a new session, records the time to the first
``token`` event (TTFT), to the ``done`` event (E2E) and the answer tier, then thinks for an
exponential time with mean ``--think`` seconds. Requests still running at the end are
awaited (bounded by ``--timeout``).

Then the baseline: the same mix for the same duration against a fresh kefu started with
``--no-fast-path`` (every message goes to the LLM). Both tables are printed per tier, for
the fast path (every tier but llm) and for llm, with the ratio of the LLM's p50 E2E to the
fast path's. The figures are printed, never judged: the exit status is 0 whatever they are.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from answer_quality import DATA, Reply, post_chat
from harness import kefu_server, percentile
from kefu.observe.timeline import STAGE_OF_MARK

DEMO_KB = Path(__file__).resolve().parent.parent / "src" / "kefu" / "demo" / "kb"
FAST_KINDS = {"paraphrase", "order_status", "smalltalk"}
GENERAL_KINDS = {"out_of_scope", "near_miss"}
SECOND_LOOK = "faq (second look)"  # the transformer's answers: tens of ms, not one
ARRIVALS_S = 2.0  # customers arrive over the first seconds: at most this long


@dataclass(frozen=True)
class Sample:
    tier: str  # the done event's tier; "error" when there was none
    ttft_ms: float
    e2e_ms: float
    status: int
    error: str | None
    server_ms: float  # the server's own receipt-to-done time (the done event's e2e_ms)
    stages: dict[str, float]  # the server's time per stage (ms), from the done event's marks
    sent_s: float = 0.0  # when it was sent, in seconds from the phase's start


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def message_pools(pool: str = "demo") -> tuple[list[str], list[str]]:
    """(fast-path messages, general messages). ``demo``: the demo KB's questions and the
    dev and test splits; ``fresh``: the fresh and fresh2 splits alone, customers' own
    wording, which the first look often declines and the second look answers."""
    fast: list[str] = []
    general: list[str] = []
    if pool == "demo":
        fast += [
            row["question"]
            for name in ("shop_en.csv", "shop_zh.csv")
            for row in read_csv(DEMO_KB / name)
        ]
        rows = read_csv(DATA / "answer_quality.csv")
        general += [
            question
            for pair in read_csv(DATA / "cache_pairs.csv")
            for question in (pair["question"], pair["cached_question"])
        ]
    else:
        splits = ("fresh", "fresh2")
        rows = [row for split in splits for row in read_csv(DATA / f"answer_quality_{split}.csv")]
    for row in rows:
        if row["kind"] in FAST_KINDS:
            fast.append(row["message"])
        elif row["kind"] in GENERAL_KINDS:
            general.append(row["message"])
    return fast, sorted(set(general))


def popularity(n: int, zipf: float) -> list[float]:
    """Cumulative weights: the k-th message of the pool asked 1/k**zipf as often as the
    first (0 = uniform). Customer questions repeat; a few are most of the traffic."""
    total = 0.0
    cumulative = []
    for rank in range(1, n + 1):
        total += 1 / rank**zipf
        cumulative.append(total)
    return cumulative


def sample_of(reply: Reply, start: float = 0.0) -> Sample:
    end = reply.done or reply.end
    first = reply.first_token or end
    tier = reply.tier if reply.error is None and reply.tier else "error"
    if tier == "faq" and (reply.reason or "").startswith("second look"):
        tier = SECOND_LOOK
    e2e_ms = (end - reply.sent) * 1e3
    server_ms = reply.server_e2e_ms if reply.server_e2e_ms is not None else e2e_ms
    ttft_ms = (first - reply.sent) * 1e3
    return Sample(
        tier,
        ttft_ms,
        e2e_ms,
        reply.status,
        reply.error,
        server_ms,
        stages_of(reply),
        reply.sent - start,
    )


def stages_of(reply: Reply) -> dict[str, float]:
    """How long each stage of the server's time took, named as the server's own metrics
    name them: the done event's marks are offsets from receipt, so a stage is the gap
    between its mark and the one before."""
    marks = sorted(
        (at, name.removesuffix("_at_ms"))
        for name, at in reply.timings.items()
        if name.endswith("_at_ms")
    )
    return {
        STAGE_OF_MARK.get(name, name): at - before
        for (before, _), (at, name) in itertools.pairwise(marks)
    }


async def customer(
    client: httpx.AsyncClient,
    url: str,
    pools: tuple[list[str], list[str]],
    fast_share: float,
    think: float,
    deadline: float,
    rng: random.Random,
    out: list[Sample],
    zipf: float,
    limit_s: float,
) -> None:
    fast, general = pools
    weights = popularity(len(fast), zipf)
    start = time.perf_counter()
    await asyncio.sleep(rng.uniform(0, min(think, ARRIVALS_S)))  # not all arrive at once
    while time.monotonic() < deadline:
        if rng.random() < fast_share:
            message = rng.choices(fast, cum_weights=weights)[0]
        else:
            message = rng.choice(general)
        out.append(sample_of(await bounded_chat(client, url, message, limit_s), start))
        pause = rng.expovariate(1 / think) if think > 0 else 0.0
        await asyncio.sleep(max(0.0, min(pause, deadline - time.monotonic())))


async def bounded_chat(client: httpx.AsyncClient, url: str, message: str, limit_s: float) -> Reply:
    """``post_chat`` given up after ``limit_s`` seconds in all: the client's own timeout
    bounds each read, and a reply whose tokens trickle in (the LLM starved of CPU on a
    shared box) would hold the run's end for as long as it streams."""
    sent = time.perf_counter()
    try:
        async with asyncio.timeout(limit_s):
            return await post_chat(client, url, message)
    except TimeoutError:
        return Reply(sent=sent, end=time.perf_counter(), error=f"no done within {limit_s:g} s")


async def loop_lag(deadline: float, out: list[float], every: float = 0.01) -> None:
    """How late this process's own event loop wakes (ms): the load generator shares the
    machine with the server, and its delays are in every client-side figure."""
    while time.monotonic() < deadline:
        start = time.perf_counter()
        await asyncio.sleep(every)
        out.append((time.perf_counter() - start - every) * 1e3)


async def load(
    url: str, args: argparse.Namespace, pools: tuple[list[str], list[str]]
) -> tuple[list[Sample], list[float]]:
    limits = httpx.Limits(
        max_connections=args.clients + 8, max_keepalive_connections=args.clients + 8
    )
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as client:
        await post_chat(client, url, "hello")  # warm up, not counted
        await post_chat(client, url, pools[1][0])
        samples: list[Sample] = []
        lags: list[float] = []
        deadline = time.monotonic() + args.duration
        rng = random.Random(args.seed)
        await asyncio.gather(
            loop_lag(deadline, lags),
            *(
                customer(
                    client,
                    url,
                    pools,
                    args.fast_share,
                    args.think,
                    deadline,
                    random.Random(rng.getrandbits(64)),
                    samples,
                    args.zipf,
                    args.timeout,
                )
                for _ in range(args.clients)
            ),
        )
    return samples, lags


def row(label: str, samples: Sequence[Sample]) -> str:
    ttft = [s.ttft_ms for s in samples]
    e2e = [s.e2e_ms for s in samples]
    server = [s.server_ms for s in samples]
    figures = [percentile(ttft, 50), percentile(ttft, 99), percentile(e2e, 50), percentile(e2e, 99)]
    figures += [percentile(server, 50), percentile(server, 99)]
    return f"{label:26} {len(samples):7d} " + " ".join(f"{v:9.1f}" for v in figures)


def report(title: str, samples: Sequence[Sample], duration: float, lags: Sequence[float]) -> float:
    """Print one phase's table; return LLM p50 E2E / fast-path p50 E2E (nan if one is empty)."""
    ok = [s for s in samples if s.tier != "error"]
    errors = [s for s in samples if s.tier == "error"]
    print(
        f"\n== {title}: {len(samples)} requests started in {duration:g} s "
        f"({len(ok) / duration:.1f} answered/s)"
    )
    print(
        f"{'tier':26} {'count':>7} {'TTFT p50':>9} {'TTFT p99':>9} "
        f"{'E2E p50':>9} {'E2E p99':>9} {'srv p50':>9} {'srv p99':>9}  (ms; srv: the server's"
        " own receipt-to-done time)"
    )
    for tier in sorted({s.tier for s in ok}):
        print(row(tier, [s for s in ok if s.tier == tier]))
    fast = [s for s in ok if s.tier != "llm"]
    llm = [s for s in ok if s.tier == "llm"]
    print(row("fast path, first look", [s for s in fast if s.tier != SECOND_LOOK]))
    second = [s for s in fast if s.tier == SECOND_LOOK and s.sent_s >= ARRIVALS_S]
    if second:  # the customers' arrival, a burst that queues on its one thread, left out
        print(row(f"second look, from {ARRIVALS_S:g} s", second))
    print(row("fast path (all non-llm)", fast))
    print(row("llm", llm))
    print(row("all answered", ok))
    count_429 = sum(s.status == 429 for s in errors)
    count_503 = sum(s.status == 503 for s in errors)
    other = len(errors) - count_429 - count_503
    stage_table(fast)
    if lags:
        figures = (percentile(lags, 50), percentile(lags, 99), max(lags))
        print("client event-loop lag (the load generator's own delay, in every client figure):")
        print("  p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms".format(*figures))
    print(f"errors: 429={count_429} 503={count_503} other={other}")
    reasons = sorted({s.error or "" for s in errors if s.status not in (429, 503)})
    if reasons:
        print("  other errors: " + "; ".join(reasons[:5]))
    ratio = float("nan")
    if fast and llm:
        ratio = percentile([s.e2e_ms for s in llm], 50) / percentile([s.e2e_ms for s in fast], 50)
        print(f"llm p50 E2E / fast-path p50 E2E = {ratio:.1f}x")
    return ratio


def stage_table(fast: Sequence[Sample]) -> None:
    """Where the server's time on fast-path replies went: each stage's p50/p99/max, and
    the stages of the slowest replies (is the tail one stage, or everything at once?)."""
    names = list(dict.fromkeys(name for s in fast for name in s.stages))
    if not names:
        return
    print("server stages of fast-path replies (ms):")
    print(f"  {'stage':10} {'p50':>7} {'p99':>7} {'max':>7} {'replies':>8}")
    for name in names:
        values = [s.stages[name] for s in fast if name in s.stages]
        figures = (percentile(values, 50), percentile(values, 99), max(values))
        print(f"  {name:10} " + " ".join(f"{v:7.2f}" for v in figures) + f" {len(values):8d}")
    for s in sorted(fast, key=lambda s: s.server_ms)[-3:]:
        parts = ", ".join(f"{name} {ms:.1f}" for name, ms in s.stages.items())
        print(f"  slow: {s.server_ms:.1f} ms at {s.sent_s:.1f} s = {parts}")
    outside = [s.e2e_ms - s.server_ms for s in fast]
    figures = (percentile(outside, 50), percentile(outside, 99), max(outside))
    print("  outside the server (client E2E - server time: client, HTTP, kernel):")
    print("  p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms".format(*figures))


def phase(
    args: argparse.Namespace, pools: tuple[list[str], list[str]], *flags: str
) -> tuple[list[Sample], list[float]]:
    with kefu_server(*flags, *args.serve_flag) as url:
        return asyncio.run(load(url, args, pools))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50, help="concurrent customers")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--think", type=float, default=1.0, help="mean think time (s)")
    parser.add_argument("--fast-share", type=float, default=0.6, help="share of fast-path messages")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="per-request timeout (s), from sending to the done event",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--zipf",
        type=float,
        default=1.0,
        help="popularity of fast-path messages: the k-th is asked 1/k**ZIPF as often as the "
        "first (0 = every message equally often, so few repeat)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the --no-fast-path phase")
    parser.add_argument(
        "--pool",
        choices=("demo", "fresh"),
        default="demo",
        help="the messages: demo (the demo KB's questions, the dev and test splits, the "
        "cache pairs) or fresh (the fresh and fresh2 splits: customers' own wording, which "
        "the first look often declines and the second look answers; try --zipf 0)",
    )
    parser.add_argument(
        "--serve-flag",
        action="append",
        default=[],
        help="extra `kefu serve` argument, repeatable: --serve-flag=--engine --serve-flag=fake",
    )
    args = parser.parse_args(argv)
    pools = message_pools(args.pool)
    random.Random(args.seed).shuffle(pools[0])  # which messages are popular: any language, kind
    print(
        f"{args.clients} customers, {args.duration:g} s per phase, think {args.think:g} s, "
        f"{args.fast_share:.0%} fast-path messages ({len(pools[0])} fast, "
        f"{len(pools[1])} general), zipf {args.zipf:g}",
        file=sys.stderr,
    )
    with_fast, lags = phase(args, pools)
    ratio = report("kefu with the fast path", with_fast, args.duration, lags)
    if not args.no_baseline:
        baseline, lags = phase(args, pools, "--no-fast-path")
        report("baseline: --no-fast-path (every message to the LLM)", baseline, args.duration, lags)
        both = [s.e2e_ms for s in with_fast if s.tier != "error"]
        base = [s.e2e_ms for s in baseline if s.tier != "error"]
        print(
            f"\nall answered, E2E p50/p99: with the fast path {percentile(both, 50):.1f}/"
            f"{percentile(both, 99):.1f} ms, baseline {percentile(base, 50):.1f}/"
            f"{percentile(base, 99):.1f} ms; llm/fast-path p50 ratio {ratio:.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
