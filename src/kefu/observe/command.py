"""``kefu diagnose``: ask a running kefu where its latency lives, and print a verdict."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import httpx

from kefu.observe.diagnose import diagnose
from kefu.observe.probe import probe

EXIT_CANNOT_MEASURE = 2


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "diagnose",
        help="name the latency bottleneck of a running kefu (queue, prefill, decode, gateway)",
        description="Read a running kefu's recent requests (GET /stats) and print a verdict: "
        "each stage's share of E2E, TTFT against the thresholds, queue wait share, TTFT "
        "growth with the turn number, gateway overhead, the timeout error rate, admission's "
        "refusals (capacity, or its predictions at fault) and, under --admission-shadow, "
        "how many of the refusals it would have made were right. With too "
        "few samples it first sends a short, bounded probe load to /chat. Exit status: 0 "
        "healthy, 1 a threshold is broken, 2 it could not measure.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="kefu's base URL")
    parser.add_argument(
        "--window", type=float, default=300, help="seconds of recent requests to judge (<= 900)"
    )
    parser.add_argument("--min-samples", type=int, default=12, help="answers needed before judging")
    parser.add_argument(
        "--probe",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send a short probe load when there are too few samples",
    )
    parser.add_argument("--probe-customers", type=int, default=4, help="concurrent probe sessions")
    parser.add_argument("--probe-turns", type=int, default=3, help="messages per probe session")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("KEFU_API_KEY"),
        help="an admin key, for a kefu that asks for keys (default: env KEFU_API_KEY)",
    )
    parser.set_defaults(run=run)


def _headers(args: argparse.Namespace) -> dict[str, str]:
    return {"authorization": f"Bearer {args.api_key}"} if args.api_key else {}


def _stats(url: str, window: float, headers: dict[str, str]) -> dict[str, Any]:
    response = httpx.get(
        url.rstrip("/") + "/stats", params={"window": window}, timeout=10, headers=headers
    )
    response.raise_for_status()
    summary: dict[str, Any] = response.json()
    return summary


def run(args: argparse.Namespace) -> int:
    try:
        summary = _stats(args.url, args.window, _headers(args))
        if summary["requests"] < args.min_samples and args.probe:
            print(
                f"only {summary['requests']} answers in the last {args.window:g} s; probing "
                f"with {args.probe_customers} sessions x {args.probe_turns} turns...",
                file=sys.stderr,
            )
            result = asyncio.run(
                probe(
                    args.url,
                    customers=args.probe_customers,
                    turns=args.probe_turns,
                    headers=_headers(args),
                )
            )
            print(f"probe: {result.sent} sent, {result.failed} failed", file=sys.stderr)
            summary = _stats(args.url, args.window, _headers(args))
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        print(f"kefu diagnose: cannot read {args.url}/stats: {exc}", file=sys.stderr)
        return EXIT_CANNOT_MEASURE
    if summary["requests"] < args.min_samples:
        print(
            f"kefu diagnose: {summary['requests']} answers in the window, "
            f"{args.min_samples} needed; nothing to judge",
            file=sys.stderr,
        )
        return EXIT_CANNOT_MEASURE
    verdict = diagnose(summary)
    print(json.dumps(verdict.as_dict(), indent=2) if args.json else verdict.render())
    return verdict.exit_code
