"""Parsed ``kefu bench`` flags -> a checked BenchConfig, with one-line errors; no network."""

from __future__ import annotations

import argparse
from pathlib import Path

from kefu.bench.client import Target, parse_url
from kefu.bench.load import Mode
from kefu.bench.runner import BenchConfig
from kefu.bench.slo import parse_slo
from kefu.bench.workload import (
    Workload,
    WorkloadSpec,
    builtin_pool,
    load_pool,
    parse_think,
    parse_turns,
)

MAX_USERS = 1024


class ArgError(ValueError):
    """A flag value that argparse's types cannot check alone."""


def _levels(args: argparse.Namespace) -> tuple[Mode, tuple[float, ...], bool]:
    """(mode, levels, sweep) from --users / --rate / --sweep."""
    if args.sweep is not None:
        text = args.sweep.strip()
        mode: Mode = "rate" if text.startswith("rate:") else "users"
        text = text.removeprefix("rate:").removeprefix("users:")
        try:
            levels = tuple(sorted({float(x) for x in text.split(",") if x.strip()}))
        except ValueError:
            raise ArgError(f"--sweep {args.sweep!r}: use e.g. 1,2,4,8 or rate:0.5,1,2") from None
        if not levels or any(x <= 0 for x in levels):
            raise ArgError(f"--sweep {args.sweep!r}: levels must be positive numbers")
        if mode == "users" and any(x != int(x) or x > MAX_USERS for x in levels):
            raise ArgError(f"--sweep: user counts must be whole numbers up to {MAX_USERS}")
        return mode, levels, True
    if args.rate is not None:
        if not 0 < args.rate <= 1000:
            raise ArgError("--rate must be above 0 and at most 1000 sessions per second")
        return "rate", (args.rate,), False
    users = 4 if args.users is None else args.users
    if not 1 <= users <= MAX_USERS:
        raise ArgError(f"--users must be between 1 and {MAX_USERS}")
    return "users", (float(users),), False


def _check_bounds(args: argparse.Namespace) -> None:
    checks = (
        (1 <= args.requests <= 100_000, "--requests must be between 1 and 100000"),
        (0 < args.duration <= 3600, "--duration must be above 0 and at most 3600 seconds"),
        (0 < args.timeout <= 600, "--timeout must be above 0 and at most 600 seconds"),
        (args.knee_growth > 1, "--knee-growth must be above 1"),
        (args.max_tokens >= 1, "--max-tokens must be at least 1"),
        (0 <= args.temperature <= 2, "--temperature must be between 0 and 2"),
        (args.history_turns >= 0, "--history-turns must be at least 0"),
    )
    for ok, message in checks:
        if not ok:
            raise ArgError(message)


def build_config(args: argparse.Namespace) -> BenchConfig:
    """Every check that needs no network; raises ArgError, TargetError, WorkloadError or
    SloError with a one-line message."""
    if not args.url:
        raise ArgError("--url is required (or compare runs: kefu bench compare A.json B.json)")
    _check_bounds(args)
    mode, levels, sweep = _levels(args)
    pool = builtin_pool(args.pool) if args.pool in ("en", "zh") else load_pool(Path(args.pool))
    spec = WorkloadSpec(
        pool=pool,
        turns=parse_turns(args.turns),
        think=parse_think(args.think),
        repeat_share=args.repeat_share,
        order_share=args.order_share,
        zipf_s=args.zipf,
        seed=args.seed,
    )
    Workload(spec)  # checks the shares against the pool now, not after the preflight
    system = args.system
    if system is None and args.api == "openai":
        from kefu.settings import DEFAULT_PERSONA

        system = DEFAULT_PERSONA
    target = Target(
        base=parse_url(args.url),
        api=args.api,
        model=args.model,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        system=system or None,
        history_turns=args.history_turns,
    )
    return BenchConfig(
        target=target,
        workload=spec,
        mode=mode,
        levels=levels,
        sweep=sweep,
        requests=args.requests,
        duration=args.duration,
        timeout=args.timeout,
        slo=parse_slo(args.slo),
        max_growth=args.knee_growth,
        label=args.label or "",
        api_key=args.api_key or None,
    )
