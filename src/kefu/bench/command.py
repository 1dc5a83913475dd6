"""``kefu bench`` and ``kefu bench compare``: flags, checks with one-line errors, and output.

Only argparse is imported at start-up, so ``kefu --help`` stays fast; the run functions
import the HTTP client, the maths and matplotlib when they run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kefu.bench.runner import BenchResult

DEFAULT_SWEEP = "1,2,4,8,16,32"

DESCRIPTION = """\
Load-test kefu's /chat (SSE) or any OpenAI-compatible /v1/chat/completions server with
simulated customers: sessions of several turns with think time, popular questions that
repeat across customers (Zipf), unique questions and order-status questions.

Three modes: a fixed number of users (--users), Poisson arrivals of sessions (--rate), or
a sweep that doubles the users level by level (--sweep) and reports the knee: the highest
load whose TTFT p99 meets the SLO and whose E2E p50 grew less than 1.5x over the previous
(half) load. Each level is bounded by --requests and --duration; traffic goes only to
--url.

Metrics come from raw timestamps per request: TTFT (first non-empty content - sent), TPOT
((E2E - TTFT) / (tokens - 1)), ITL (gaps between content chunks), E2E, at p50/p90/p99;
throughput, goodput under --slo, errors and timeouts; split by answer tier and by turn."""

EPILOG = """\
examples:
  kefu bench --url http://127.0.0.1:8000 --users 8
  kefu bench --url http://127.0.0.1:8000 --sweep --out bench-kefu
  kefu bench --url http://127.0.0.1:8001 --api openai --sweep --out bench-vllm
  kefu bench compare bench-vllm/summary.json bench-kefu/summary.json

kefu bench compare A.json B.json prints two runs' summaries side by side with B/A ratios."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` (and its ``compare``) to the ``kefu`` command's subcommands."""
    bench = commands.add_parser(
        "bench",
        help="load-test a kefu or OpenAI-compatible server: sessions, sweep, knee, report",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = bench.add_argument_group("target")
    target.add_argument(
        "--url", metavar="URL", help="base URL of the server, e.g. http://127.0.0.1:8000"
    )
    target.add_argument(
        "--api",
        choices=("chat", "openai"),
        default="chat",
        help="chat: kefu's /chat SSE sessions; openai: /v1/chat/completions streaming, the "
        "client resending the history (default: chat)",
    )
    target.add_argument(
        "--model",
        metavar="NAME",
        help="openai: the model name to send (default: the first of GET /v1/models)",
    )
    target.add_argument(
        "--api-key",
        metavar="KEY",
        default=os.environ.get("KEFU_BENCH_API_KEY"),
        help="sent as 'Authorization: Bearer KEY' to /chat, /v1 and the preflight, for a "
        "server with auth on (env KEFU_BENCH_API_KEY keeps it off the command line; never "
        "written to the results)",
    )
    target.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        default=256,
        help="openai: max_tokens of each request (default: 256, kefu's --max-tokens default)",
    )
    target.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        default=0.3,
        help="openai: sampling temperature (default: 0.3, as kefu's /chat)",
    )
    target.add_argument(
        "--system",
        metavar="TEXT",
        help="openai: system prompt ('' for none; default: kefu's default persona, so the "
        "prompt matches what /chat builds)",
    )
    target.add_argument(
        "--history-turns",
        type=int,
        metavar="N",
        default=3,
        help="openai: earlier turns resent with each message (default: 3, as kefu's /chat)",
    )

    load = bench.add_argument_group("load (one of)").add_mutually_exclusive_group()
    load.add_argument(
        "--users",
        type=int,
        metavar="N",
        help="fixed concurrency: this many customers at once (default: 4)",
    )
    load.add_argument(
        "--rate",
        type=float,
        metavar="R",
        help="open loop: new customer sessions per second, Poisson arrivals",
    )
    load.add_argument(
        "--sweep",
        nargs="?",
        const=DEFAULT_SWEEP,
        metavar="LEVELS",
        help=f"run level after level and report the knee; LEVELS are user counts "
        f"(default: {DEFAULT_SWEEP}) or 'rate:0.5,1,2,4' for sessions per second",
    )

    bounds = bench.add_argument_group("bounds (per level)")
    bounds.add_argument(
        "--requests",
        type=int,
        metavar="N",
        default=200,
        help="requests per level at most (default: 200)",
    )
    bounds.add_argument(
        "--duration",
        type=float,
        metavar="S",
        default=120.0,
        help="seconds per level at most; no request starts later (default: 120)",
    )
    bounds.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        default=60.0,
        help="seconds a request may take before it counts as a timeout (default: 60)",
    )

    work = bench.add_argument_group("workload")
    work.add_argument(
        "--pool",
        default="en",
        metavar="POOL",
        help="messages: 'en' or 'zh' (built-in shop questions) or a JSONL file of "
        '{"text": ..., "kind": "faq"|"unique"|"order"} lines (default: en)',
    )
    work.add_argument(
        "--turns",
        default="1-4",
        metavar="SPEC",
        help="turns per session: N or A-B, uniform (default: 1-4)",
    )
    work.add_argument(
        "--think",
        default="1",
        metavar="SPEC",
        help="seconds between turns: MEAN (exponential; 0 = none) or A-B uniform (default: 1)",
    )
    work.add_argument(
        "--repeat-share",
        type=float,
        metavar="F",
        default=0.5,
        help="share of messages that are popular FAQs, repeating across customers (default: 0.5)",
    )
    work.add_argument(
        "--zipf",
        type=float,
        metavar="S",
        default=1.0,
        help="Zipf exponent of FAQ popularity: weight 1/rank^S; 0 = uniform (default: 1.0)",
    )
    work.add_argument(
        "--order-share",
        type=float,
        metavar="F",
        default=0.1,
        help="share of messages that ask for an order's status (default: 0.1)",
    )
    work.add_argument(
        "--seed",
        type=int,
        metavar="N",
        default=0,
        help="workload seed: same seed, same customers (default: 0)",
    )

    out = bench.add_argument_group("results")
    out.add_argument(
        "--slo",
        default="ttft=1s",
        metavar="SPEC",
        help="service-level objective for goodput and the knee, e.g. ttft=1s,e2e=5s,tpot=50ms "
        "(default: ttft=1s)",
    )
    out.add_argument(
        "--knee-growth",
        type=float,
        metavar="X",
        default=1.5,
        help="the knee's limit on E2E p50 growth when the load doubles (default: 1.5)",
    )
    out.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write summary.json, requests.jsonl, PNG plots and report.html here",
    )
    out.add_argument(
        "--label", metavar="NAME", help="name of this run in reports and compare (default: the URL)"
    )
    out.add_argument(
        "--no-progress", action="store_true", help="no progress bar or per-level lines on stderr"
    )
    bench.set_defaults(run=run_bench_command)

    sub = bench.add_subparsers(
        title="compare runs instead", dest="bench_command", metavar="compare", required=False
    )
    compare = sub.add_parser(
        "compare",
        help="compare two runs: kefu bench compare A.json B.json",
        description="Print two runs' summary.json side by side, level by level, with B/A "
        "ratios and which run did better.",
    )
    compare.add_argument("a", type=Path, metavar="A.json", help="the first run's summary.json")
    compare.add_argument("b", type=Path, metavar="B.json", help="the second run's summary.json")
    compare.set_defaults(run=run_compare_command)


def _error(message: str) -> int:
    print(f"kefu bench: error: {message}", file=sys.stderr)
    return 2


def run_bench_command(args: argparse.Namespace) -> int:
    import asyncio

    from kefu.bench.client import TargetError
    from kefu.bench.config import ArgError, build_config
    from kefu.bench.slo import SloError
    from kefu.bench.workload import WorkloadError

    try:
        config = build_config(args)
    except (ArgError, TargetError, WorkloadError, SloError) as exc:
        return _error(str(exc))
    from kefu.bench.progress import ProgressBar
    from kefu.bench.report import console_report
    from kefu.bench.runner import run_bench

    progress = None if args.no_progress else ProgressBar()
    try:
        result = asyncio.run(run_bench(config, progress))
    except TargetError as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        print("\nkefu bench: interrupted; no results written", file=sys.stderr)
        return 130
    print(console_report(result), end="")
    if args.out is not None:
        written = _write_out(result, args.out)
        print("\nwrote: " + ", ".join(str(p) for p in written))
    return 0


def _write_out(result: BenchResult, out: Path) -> list[Path]:
    from kefu.bench.html import write_html
    from kefu.bench.plots import write_plots
    from kefu.bench.report import write_results

    written = write_results(result, out)
    images = write_plots(result, out)
    return [*written, *images, write_html(result, out, images)]


def run_compare_command(args: argparse.Namespace) -> int:
    from kefu.bench.compare import compare_text
    from kefu.bench.report import BenchFileError, load_summary

    try:
        a, b = load_summary(args.a), load_summary(args.b)
    except BenchFileError as exc:
        return _error(str(exc))
    print(compare_text(a, b, str(args.a), str(args.b)), end="")
    return 0
