"""/chat prompts fitted to the TTFT SLO, against the same server without (``--fit-to-slo``
against ``--no-fit-to-slo``): does a conversation's model turn under load come within the
SLO more often, and what does it leave out?

Each run is a fresh ``kefu serve`` (bundled model, defaults but the fit) under ``kefu bench
--users N --turns 1-5 --think 1`` on ``/chat`` for ``--duration`` seconds; the two servers
alternate which goes first round by round (this box's speed moves between runs). Printed
per run: the model's answers, how many came past the SLO, their TTFT p50/p90, the
requests refused, the prompts fitted and the tokens they left unread (``/metrics``); per
load, both servers' totals and the ratio of model answers within the SLO.

    .venv/bin/python benchmarks/prompt_fit.py [--users 16,60] [--duration 60] [--rounds 2]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from admission import bench_sessions
from harness import kefu_process, metric_sum, percentile


@dataclass
class Run:
    fit: bool
    users: int
    ttfts: list[float] = field(default_factory=list)  # the model's answers, seconds
    refused: int = 0
    sent: int = 0
    fitted: int = 0
    tokens_left_out: int = 0

    def missed(self, slo: float) -> int:
        return sum(ttft > slo for ttft in self.ttfts)


def run_once(fit: bool, users: int, args: argparse.Namespace, seed: int) -> Run:
    flags = ["--ttft-slo", str(args.slo), "--fit-to-slo" if fit else "--no-fit-to-slo"]
    run = Run(fit, users)
    with kefu_process(*flags, ready_timeout=600) as (url, _):
        for record in bench_sessions(url, users, args.duration, seed, args.slo):
            run.sent += 1
            if record["http_status"] in (429, 503):
                run.refused += 1
            elif record["tier"] == "llm" and record["first_content"] is not None:
                run.ttfts.append(record["first_content"] - record["sent"])
        run.fitted = int(metric_sum(url, "kefu_fitted_prompts_total"))
        run.tokens_left_out = int(metric_sum(url, 'kefu_tokens_total{kind="fitted_out"}'))
    return run


def row(run: Run, slo: float) -> str:
    ttfts = sorted(run.ttfts)
    p50 = percentile(ttfts, 50) * 1000 if ttfts else 0.0
    p90 = percentile(ttfts, 90) * 1000 if ttfts else 0.0
    missed = run.missed(slo)
    share = 100 * missed / len(ttfts) if ttfts else 0.0
    return (
        f"{'fit' if run.fit else 'no fit':7} {run.users:5} {run.sent:5} {len(ttfts):5} "
        f"{missed:4} {share:5.0f}% {p50:7.0f} {p90:7.0f} {run.refused:7} {run.fitted:6} "
        f"{run.tokens_left_out:7}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="16,60", help="simulated customers, per load")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each server per load")
    parser.add_argument("--slo", type=float, default=2.0, help="TTFT SLO in seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        f"fresh kefu serve per run, bundled model, TTFT SLO {args.slo:g} s, "
        f"{args.duration:g} s a run (TTFT of the model's answers, ms)\n"
    )
    print("server  users  sent model past  share   ttft50  ttft90 refused fitted  tokens")
    for users in (int(u) for u in args.users.split(",")):
        runs: list[Run] = []
        for index in range(args.rounds):
            order = (False, True) if index % 2 == 0 else (True, False)
            for fit in order:
                run = run_once(fit, users, args, args.seed + index)
                runs.append(run)
                print(row(run, args.slo), flush=True)
        made = {
            fit: sum(len(r.ttfts) - r.missed(args.slo) for r in runs if r.fit == fit)
            for fit in (False, True)
        }
        answers = {fit: sum(len(r.ttfts) for r in runs if r.fit == fit) for fit in (False, True)}
        missed = {fit: answers[fit] - made[fit] for fit in (False, True)}
        ratio = made[True] / made[False] if made[False] else float("inf")
        print(
            f"  {users} users: model answers within the SLO, fit / no fit = {made[True]} / "
            f"{made[False]} = {ratio:.2f}x; past it {missed[True]} of {answers[True]} "
            f"against {missed[False]} of {answers[False]}\n",
            flush=True,
        )


if __name__ == "__main__":
    main()
