"""Admission's promise against the outcomes (issue 36): refused only what would miss the
SLO? Both kinds of error, each policy, each load, in one run on the real model.

Policies, each on a fresh ``kefu serve`` per run (bundled model, ``--parallel P``, SLO S):
``queue`` (the bounded line alone), ``predicted`` (kefu's default) and ``shadow``
(``predicted --admission-shadow``: admits everything and records what it would have
refused, so the refusals' precision and recall are measured on outcomes).

Load is a multiple of the engine's measured capacity:

- ``streams``: closed-loop ``/v1`` streams (each client sends its next request when the
  last one ends, or after the Retry-After of a refusal, as the OpenAI SDK does;
  ``--max-tokens`` 64). Capacity: P streams, one per engine slot.
- ``sessions``: ``kefu bench --users N --turns 1-5 --think 1`` on ``/chat``. Capacity: the
  users whose LLM-bound messages match what the engine answers, both measured in this run
  (a saturated bench's LLM answers per second under ``queue``, and a light 4-user bench's
  LLM messages per user-second).

Printed per run: sent / answered / refused (429, 503 and the line's timeouts), the
accepted answers' TTFT p50/p99 (LLM answers for sessions), SLO misses among them and
(``free``, the server's count) how many of those met no queue at admission (a free slot,
nothing ahead to read: the engine's own speed, which no refusal could have helped),
goodput (answers whose first token came within the SLO, per second), the server's own
record of its predictions near the SLO (realized ÷ predicted at p50 and p90 over the
recent predictions of at least a quarter of the SLO, and how many, from /ready) and the
would-refuse confusion it kept: precision (would-refuse requests that really missed the
SLO) and recall (misses it would have refused), and how long a refused request took to
hear it (p50/p99: a refusal at the door is at once, one from the line after its wait),
and the would-refuse outcomes by the rule that said refuse (the miss curve, past twice the
SLO with no outcomes that long, a fresh server's probe in flight). Under each shadow row,
``kefu diagnose``'s verdict on those would-be refusals. Predictions are recorded under
every policy; only ``predicted`` acts on them.

    .venv/bin/python benchmarks/admission.py [--levels 0.5,1,2,10] [--duration 30]
        [--workloads streams,sessions] [--policies queue,predicted,shadow]

``--diagnose``: instead, ``kefu diagnose`` against a fresh default server (it probes
itself), printed whole.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness import kefu_process, percentile, sse_events, summary

POLICY_FLAGS = {
    "queue": ["--admission", "queue"],
    "predicted": ["--admission", "predicted"],
    "shadow": ["--admission", "predicted", "--admission-shadow"],
}
QUESTIONS = [
    "Where is my parcel? I ordered it last Monday, order {n}.",
    "How do I return a pair of shoes that do not fit? It was order {n}.",
    "Can I change the delivery address of order {n}?",
    "How long does a refund take for order {n}?",
    "Do you ship to Canada, and how much does it cost? Asking about order {n}.",
    "I received a damaged item in order {n}. What should I do?",
    "How do I get an invoice for order {n}?",
    "Can I pay for order {n} with a gift card?",
]


@dataclass
class Request:
    sent: float
    end: float
    status: int
    first: float | None = None
    code: str | None = None  # the error's code, where it failed
    text: str = ""
    retry_after: float = 1.0  # a refusal's Retry-After, seconds

    @property
    def refused(self) -> bool:
        """Turned away by admission: at the door (429/503) or from the line mid-stream."""
        return self.status in (429, 503) or self.code in ("queue_timeout", "overloaded")


@dataclass
class Run:
    policy: str
    workload: str
    level: float
    clients: int
    duration: float
    slo: float
    answered: list[float] = field(default_factory=list)  # accepted TTFTs (LLM for sessions)
    sent: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    refused_in: list[float] = field(default_factory=list)  # seconds to each refusal
    other: int = 0  # failed otherwise
    fast: int = 0  # sessions: answered without the engine
    admission: dict[str, Any] = field(default_factory=dict)  # /ready's, at the end
    shadow_verdict: str = ""  # kefu diagnose's shadow finding, for a shadow run

    def good(self) -> int:
        return sum(1 for t in self.answered if t <= self.slo) + self.fast


async def one_stream(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Request:
    """POST a streamed chat completion: when its first content came, its text, its end."""
    sent = time.perf_counter()
    parts: list[str] = []
    first = None
    try:
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                payload = json.loads(await r.aread() or b"{}")
                code = (payload.get("error") or {}).get("code") or str(r.status_code)
                wait = float(r.headers.get("retry-after", 1))
                return Request(
                    sent, time.perf_counter(), r.status_code, code=code, retry_after=wait
                )
            async for event in sse_events(r):
                if event.data == "[DONE]":
                    continue
                chunk = json.loads(event.data)
                if "error" in chunk:
                    code = chunk["error"].get("code") or "error"
                    return Request(sent, time.perf_counter(), 200, code=code)
                for choice in chunk.get("choices", []):
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        first = first or time.perf_counter()
                        parts.append(content)
    except httpx.HTTPError as exc:
        return Request(sent, time.perf_counter(), 0, code=type(exc).__name__)
    return Request(sent, time.perf_counter(), 200, first=first, text="".join(parts))


def question_body(rng: random.Random) -> dict[str, Any]:
    """A streamed chat completion of 64 tokens asking one of QUESTIONS."""
    question = rng.choice(QUESTIONS).format(n=rng.randrange(10_000, 99_999))
    return {
        "model": "bench",
        "messages": [{"role": "user", "content": question}],
        "max_tokens": 64,
        "temperature": 0.7,
        "stream": True,
    }


async def closed_loop(url: str, clients: int, duration: float, seed: int) -> list[Request]:
    """``clients`` streams, each sending its next request when the last ends, until
    ``duration`` seconds have passed (no request starts later)."""
    rng = random.Random(seed)
    results: list[Request] = []
    deadline = time.perf_counter() + duration

    async def client_loop(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline:
            request = await one_stream(client, url, question_body(rng))
            results.append(request)
            if request.status in (429, 503):
                # As the OpenAI SDK does: the next try after the server's Retry-After.
                await asyncio.sleep(min(request.retry_after, deadline - time.perf_counter()))

    limits = httpx.Limits(max_connections=clients + 4)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
    return results


def bench_sessions(
    url: str, users: int, duration: float, seed: int, slo: float
) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="kefu-admission-") as out:
        command = [sys.executable, "-m", "kefu", "bench", "--url", url, "--users", str(users)]
        command += ["--duration", str(duration), "--turns", "1-5", "--think", "1"]
        command += ["--requests", "100000", "--timeout", "120", "--slo", f"ttft={slo}s"]
        command += ["--out", out, "--no-progress", "--seed", str(seed)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        lines = (Path(out) / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def code_of(record: dict[str, Any]) -> str:
    # "HTTP 503 queue_full: the server ..." -> queue_full
    parts = (record.get("error") or "").split()
    return parts[2].rstrip(":") if len(parts) > 2 and parts[0] == "HTTP" else record["status"]


def run_once(
    policy: str, workload: str, level: float, clients: int, args: argparse.Namespace
) -> Run:
    flags = [*POLICY_FLAGS[policy], "--ttft-slo", str(args.slo), "--parallel", str(args.parallel)]
    if args.quantile is not None:
        flags += ["--admission-quantile", str(args.quantile)]
    run = Run(policy, workload, level, clients, args.duration, args.slo)
    with kefu_process(*flags, ready_timeout=600) as (url, _):
        if workload == "streams":
            for r in asyncio.run(closed_loop(url, clients, args.duration, args.seed)):
                run.sent += 1
                if r.refused:
                    code = r.code or str(r.status)
                    run.refused[code] = run.refused.get(code, 0) + 1
                    run.refused_in.append(r.end - r.sent)
                elif r.code is not None or r.first is None:
                    run.other += 1
                else:
                    run.answered.append(r.first - r.sent)
        else:
            for record in bench_sessions(url, clients, args.duration, args.seed, args.slo):
                run.sent += 1
                if record["http_status"] in (429, 503):
                    code = code_of(record)
                    run.refused[code] = run.refused.get(code, 0) + 1
                    run.refused_in.append(record["end"] - record["sent"])
                elif record["status"] != "ok":
                    run.other += 1
                elif record["tier"] != "llm":
                    run.fast += 1
                elif record["first_content"] is not None:
                    run.answered.append(record["first_content"] - record["sent"])
        run.admission = httpx.get(url + "/ready", timeout=10).json()["admission"]
        if policy == "shadow":
            run.shadow_verdict = shadow_finding(url)
    return run


def shadow_finding(url: str) -> str:
    """What ``kefu diagnose`` says of a shadow server's would-be refusals."""
    command = [sys.executable, "-m", "kefu", "diagnose", "--url", url, "--no-probe", "--json"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        findings = json.loads(result.stdout)["findings"]
    except (ValueError, KeyError):
        return f"diagnose gave no verdict (exit {result.returncode}): {result.stderr.strip()}"
    found = [f"{f['status']}: {f['message']}" for f in findings if f["check"] == "shadow"]
    return found[0] if found else "no shadow finding"


def fmt(value: float | None, scale: float = 1000.0, digits: int = 0) -> str:
    if value is None or value != value:
        return "-"
    return f"{value * scale:.{digits}f}"


HEADER = (
    f"{'workload':8} {'load':>5} {'clients':>7} {'policy':9} {'sent':>5} {'answd':>5} "
    f"{'refused':>7} {'other':>5} {'ttft50':>6} {'ttft99':>6} {'miss':>9} {'free':>4} "
    f"{'good/s':>6} "
    f"{'ratio50':>7} {'ratio90':>7} {'near':>5} {'prec':>5} {'recall':>6} "
    f"{'wouldref':>8} {'refused in p50/p99':>18} {'refused (by code)':30} "
    "would refuse by rule (missed/all)"
)


def print_run(run: Run) -> None:
    answered = run.answered
    missed = sum(1 for t in answered if t > run.slo)
    predictions = run.admission["predictions"]
    near = predictions["near_slo"]
    would = predictions["would_refuse"]
    miss = f"{missed} {missed / len(answered):.1%}" if answered else "-"
    codes = " ".join(f"{k} {v}" for k, v in sorted(run.refused.items())) or "-"
    took = run.refused_in
    refused_in = f"{fmt(percentile(took, 50))}/{fmt(percentile(took, 99))} ms" if took else "-"
    print(
        f"{run.workload:8} {run.level:5g} {run.clients:7} {run.policy:9} {run.sent:5} "
        f"{len(answered) + run.fast:5} {sum(run.refused.values()):7} {run.other:5} "
        f"{fmt(percentile(answered, 50)):>6} {fmt(percentile(answered, 99)):>6} {miss:>9} "
        f"{predictions['admitted_missed_unqueued']:4} {run.good() / run.duration:6.2f} "
        f"{fmt(near['ratio_p50'], 1, 2):>7} {fmt(near['ratio_p90'], 1, 2):>7} "
        f"{near['outcomes']:5} "
        f"{fmt(would['precision'], 100):>4}% {fmt(predictions['recall'], 100):>5}% "
        f"{would['missed'] + would['made']:8} {refused_in:>18} {codes:30} {by_rule(would)}",
        flush=True,
    )


def by_rule(would: dict[str, Any]) -> str:
    """Would-refuse outcomes by the rule that said refuse: missed/all of each."""
    counts = would.get("by_rule", {})
    return " ".join(
        f"{rule} {c['missed']}/{c['missed'] + c['made']}"
        for rule, c in counts.items()
        if c["missed"] + c["made"]
    )


def capacity_users(args: argparse.Namespace) -> int:
    """Users whose LLM-bound messages match what the engine answers on ``/chat``: a
    saturated bench (four users a slot) under ``queue`` gives the LLM answers it completes
    per second, a light 4-user bench the LLM messages a user sends per second."""
    flags = [*POLICY_FLAGS["queue"], "--parallel", str(args.parallel)]
    rates = []
    for users in (4 * args.parallel, 4):
        with kefu_process(*flags, ready_timeout=600) as (url, _):
            records = bench_sessions(url, users, args.duration, args.seed, args.slo)
        llm = sum(1 for r in records if r.get("tier") == "llm" and r["status"] == "ok")
        rates.append(llm / args.duration)
    answered, per_user = rates[0], rates[1] / 4
    users = max(1, round(answered / per_user)) if per_user else 4
    print(
        f"  capacity: {answered:.2f} LLM answers/s saturated; a user sends {per_user:.3f} "
        f"LLM messages/s at light load: 1x = {users} users",
        file=sys.stderr,
    )
    return users


def diagnose_fresh(args: argparse.Namespace) -> None:
    with kefu_process("--parallel", str(args.parallel), ready_timeout=600) as (url, _):
        result = subprocess.run(
            [sys.executable, "-m", "kefu", "diagnose", "--url", url],
            capture_output=True,
            text=True,
            check=False,
        )
    print(f"$ kefu diagnose --url {url}   (a fresh default server; exit {result.returncode})")
    print(result.stderr.rstrip())
    print(result.stdout.rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--levels", default="0.5,1,2,10", help="load as multiples of capacity")
    parser.add_argument("--workloads", default="streams,sessions")
    parser.add_argument("--policies", default="queue,predicted,shadow")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per run")
    parser.add_argument("--slo", type=float, default=2.0, help="TTFT SLO in seconds")
    parser.add_argument("--parallel", type=int, default=8, help="engine slots")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quantile", type=float, help="--admission-quantile for kefu (default: kefu's own)"
    )
    parser.add_argument("--diagnose", action="store_true", help="kefu diagnose, fresh server")
    args = parser.parse_args()
    if args.diagnose:
        diagnose_fresh(args)
        return
    levels = [float(x) for x in args.levels.split(",")]
    policies = args.policies.split(",")
    runs: list[Run] = []
    print(
        f"fresh kefu serve per run, bundled model, --parallel {args.parallel}, TTFT SLO "
        f"{args.slo:g} s, {args.duration:g} s a run (times in ms, goodput per s)\n"
    )
    print(HEADER)
    for workload in args.workloads.split(","):
        base = capacity_users(args) if workload == "sessions" else args.parallel
        for level in levels:
            clients = max(1, round(level * base))
            for policy in policies:
                run = run_once(policy, workload, level, clients, args)
                runs.append(run)
                print_run(run)
                if run.shadow_verdict:
                    print(f"  kefu diagnose (shadow): {run.shadow_verdict}", flush=True)
    print()
    for workload in args.workloads.split(","):
        for level in levels:
            by = {r.policy: r for r in runs if r.workload == workload and r.level == level}
            queue, predicted = by.get("queue"), by.get("predicted")
            if queue is None or predicted is None:
                continue
            fits = bool(queue.answered) and percentile(queue.answered, 99) <= args.slo
            print(
                f"{workload} {level:g}x: queue's accepted TTFT p99 "
                f"{'within' if fits else 'past'} the SLO; predicted refused "
                f"{sum(predicted.refused.values())} of {predicted.sent}; goodput predicted / "
                f"queue = {predicted.good() / max(queue.good(), 1):.2f}"
            )


if __name__ == "__main__":
    main()
