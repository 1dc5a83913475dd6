"""Admission's refusal rule against other rules, on the same outcomes (issue 36: would-be
refusals at least 90 % precise).

Runs ``--runs`` fresh ``kefu serve --admission predicted --admission-shadow --log-level
debug`` (bundled model, ``--parallel P``, SLO S), each under ``--clients`` closed-loop
``/v1`` streams for ``--duration`` seconds (``admission.py``'s client), or reads logs of
such runs (``--logs``). Shadow admits every request, so every judged request has an
outcome whatever a rule says, and a rule can be replayed on the log: each judgement
that got an outcome is judged again by each rule on the outcomes recorded before it, and
scored by its own outcome (missed the SLO, or made it). The server's own judgement is
``kefu``, checked against what the server said; the others are candidates:

- ``beta10``: the miss curve's block at the estimate, its share's Beta lower bound at
  10 % (not the shrunk share) at least 0.9;
- ``shrink2``: the block's share shrunk by two misses and two made, not one of each;
- ``shorter20``: requests estimated 20 % shorter mostly missed too (a margin for the
  estimate's noise);
- ``past_slo``: the estimate itself past the SLO, not only the correction's product.

Printed per run and pooled: the would-refuse outcomes each rule gives, missed / all, and
the precision. A judgement whose refusal was a probe in flight (a fresh server's first
outcomes) is refused by every rule: it is not the curve's to replay. Judgements are
matched to their outcomes by their estimate and prediction, as logged (to the
millisecond). A log's row says how many judgements the replay of ``kefu`` decided
otherwise than the server did (none when the log is this version's).

    .venv/bin/python benchmarks/refusal_rules.py [--runs 3] [--clients 16] [--duration 30]
    .venv/bin/python benchmarks/refusal_rules.py --logs /tmp/kefu-*.log
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from admission import closed_loop
from harness import kefu_process
from kefu.faq.bound import precision_lower_bound
from kefu.limits.miss_curve import MISS_CONFIDENCE, MissCurve
from kefu.limits.outcomes import (
    FAR_MARGIN,
    MIN_OUTCOMES,
    NEAR_SHARE,
    RULES,
    WINDOW,
    Outcome,
    Outcomes,
)

SLO = 2.0
JUDGED = re.compile(r"judged .*?([\d.]+) s estimated, ([\d.]+) s predicted(?: \(refuse: (.*)\))?$")
OUTCOME = re.compile(
    r"outcome: ([\d.]+) s estimated, ([\d.]+) s predicted, ([\d.]+) s realized(.*)$"
)


@dataclass(frozen=True, slots=True)
class Judged:
    """One judged request with its outcome: when it was judged, and what the server said."""

    at: float
    outcome: Outcome
    recorded_at: float
    why: str | None  # the server's reason to refuse, as logged


def stamp(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def read_log(path: Path) -> list[Judged]:
    """The judged requests of a debug log that got an outcome, in the order recorded."""
    judged: dict[tuple[str, str], tuple[float, str | None]] = {}
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if match := JUDGED.search(line):
            judged[(match[1], match[2])] = (stamp(line), match[3])
        elif (match := OUTCOME.search(line)) and (match[1], match[2]) in judged:
            at, why = judged[(match[1], match[2])]
            rest = match[4]
            refused = "turned away" in rest  # at the line's deadline, under predicted
            censored = refused or "gave up" in rest
            realized = float(match[3])
            outcome = Outcome(
                estimate=float(match[1]),
                predicted=float(match[2]),
                realized=realized,
                queued="queued" in rest,
                rule=next((r for r in RULES if f"would refuse ({r})" in rest), None),
                missed=censored or realized > SLO,
                censored=censored,
                refused=refused,
            )
            found.append(Judged(at, outcome, stamp(line), why))
    return found


Rule = Callable[[Outcomes, float, float], bool]


def block(outcomes: Outcomes, estimate: float) -> tuple[int, int]:
    """(misses, count) of the miss curve's block the estimate falls in."""
    return MissCurve((o.estimate, o.missed) for o in outcomes.recent).block(estimate)


def curve_rule(refuse_at: Callable[[Outcomes, float], bool]) -> Rule:
    """A rule that differs from kefu's only where the miss curve decides."""

    def rule(outcomes: Outcomes, estimate: float, predicted: float) -> bool:
        if predicted <= SLO:
            return False
        far = predicted > FAR_MARGIN * SLO
        if not outcomes.ready:
            return far
        curve = MissCurve((o.estimate, o.missed) for o in outcomes.recent)
        if refuse_at(outcomes, estimate):
            return True
        return far and curve.reaching(estimate) < MIN_OUTCOMES

    return rule


def beta10(outcomes: Outcomes, estimate: float) -> bool:
    misses, count = block(outcomes, estimate)
    # Beta(misses+1, made+1)'s 10 % quantile: the Clopper-Pearson lower bound of
    # misses+1 of count+1 at 90 % confidence.
    return precision_lower_bound(misses + 1, count + 1, 0.9) >= MISS_CONFIDENCE


def shrink2(outcomes: Outcomes, estimate: float) -> bool:
    misses, count = block(outcomes, estimate)
    return (misses + 2) / (count + 4) >= MISS_CONFIDENCE


def shorter20(outcomes: Outcomes, estimate: float) -> bool:
    curve = MissCurve((o.estimate, o.missed) for o in outcomes.recent)
    return curve(estimate * 0.8) >= MISS_CONFIDENCE


def past_slo(outcomes: Outcomes, estimate: float) -> bool:
    curve = MissCurve((o.estimate, o.missed) for o in outcomes.recent)
    return estimate > SLO and curve(estimate) >= MISS_CONFIDENCE


def kefu_rule(outcomes: Outcomes, estimate: float, predicted: float) -> bool:
    return outcomes.refusal(estimate, predicted, SLO)[0] is not None


CANDIDATES: dict[str, Rule] = {
    "kefu": kefu_rule,
    "beta10": curve_rule(beta10),
    "shrink2": curve_rule(shrink2),
    "shorter20": curve_rule(shorter20),
    "past_slo": curve_rule(past_slo),
}


def replay(found: list[Judged]) -> tuple[dict[str, list[int]], int]:
    """Per rule [would-refuse that missed, that made it]; and how often ``kefu`` disagreed
    with what the server logged (0: the replay reproduces the server)."""
    counts = {name: [0, 0] for name in CANDIDATES}
    disagreed = 0
    for judged in found:
        if not judged.outcome.queued:
            continue  # nothing to refuse on
        outcomes = Outcomes(0.9, near=SLO * NEAR_SHARE)
        for earlier in [j for j in found if j.recorded_at < judged.at][-WINDOW:]:
            outcomes.add(earlier.outcome)
        probe = judged.why is not None and "probe" in judged.why
        column = 0 if judged.outcome.missed else 1
        for name, rule in CANDIDATES.items():
            if probe or rule(outcomes, judged.outcome.estimate, judged.outcome.predicted):
                counts[name][column] += 1
        said = judged.why is not None
        if not probe and said != kefu_rule(
            outcomes, judged.outcome.estimate, judged.outcome.predicted
        ):
            disagreed += 1
    return counts, disagreed


def row(label: str, counts: dict[str, list[int]]) -> str:
    cells = []
    for missed, made in counts.values():
        share = f"{missed / (missed + made):.0%}" if missed + made else "-"
        cells.append(f"{missed}/{missed + made} {share:>4}")
    return f"{label:28} " + " ".join(f"{cell:>12}" for cell in cells)


def shadow_run(clients: int, duration: float, parallel: int, seed: int, log: Path) -> None:
    flags = ["--admission", "predicted", "--admission-shadow", "--ttft-slo", str(SLO)]
    flags += ["--parallel", str(parallel), "--log-level", "debug"]
    with kefu_process(*flags, ready_timeout=600, log=log) as (url, _):
        asyncio.run(closed_loop(url, clients, duration, seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh shadow runs")
    parser.add_argument("--clients", type=int, default=16, help="closed-loop /v1 streams")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per run")
    parser.add_argument("--parallel", type=int, default=8, help="engine slots")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--logs", nargs="*", type=Path, help="replay these logs, run nothing")
    args = parser.parse_args()
    logs = args.logs
    if not logs:
        folder = Path(tempfile.mkdtemp(prefix="kefu-refusal-rules-"))
        logs = []
        for run in range(args.runs):
            log = folder / f"shadow-{run}.log"
            shadow_run(args.clients, args.duration, args.parallel, args.seed + run, log)
            logs.append(log)
    print(f"would-refuse outcomes that missed the {SLO:g} s SLO / all, by rule (shadow runs)")
    print(f"{'log':28} " + " ".join(f"{name:>12}" for name in CANDIDATES))
    pooled = {name: [0, 0] for name in CANDIDATES}
    for log in logs:
        counts, disagreed = replay(read_log(log))
        for name, (missed, made) in counts.items():
            pooled[name][0] += missed
            pooled[name][1] += made
        label = log.name + (f" ({disagreed} differ)" if disagreed else "")
        print(row(label, counts), flush=True)
    print(row("pooled", pooled))


if __name__ == "__main__":
    main()
