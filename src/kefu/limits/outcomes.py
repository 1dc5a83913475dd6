"""Admission's predictions beside what then happened, and the correction they give.

Every admitted request's predicted first-token time is kept beside its realized one.
Three uses:

- **Correction.** The rates' model (``rates.py``) gives a point estimate from assumptions
  (prompts read one after another, a slot freeing every service/slots seconds). What the
  engine really does (several prompts read in one step, the prefix cache skipping most of
  a repeated prompt) shows in the ratio realized / estimated, so the prediction admission
  acts on is the estimate times a quantile of the recent ratios: a conformal correction,
  not a formula's upper bound. It is measured where it is used: on outcomes whose estimate
  was at least ``near`` (a quarter of the SLO), where refusals are decided. A short
  estimate is mostly an engine step's floor, and its ratio says little of a long wait's
  (lone requests may come at several times their estimates; that factor applied to a
  slot wait would refuse requests that make the SLO). Until ``MIN_OUTCOMES`` such outcomes
  exist the estimate stands as it is.
- **The refusal rule** (``refusal``). Past the SLO, a request is refused where the
  recent requests estimated alike mostly missed (``miss_curve.py``), or, beyond what the
  outcomes reach (before ``MIN_OUTCOMES`` near the SLO, everywhere), where the prediction
  lies past twice the SLO.
- **The promise checked.** ``report`` gives the recent median and p90 of realized ÷
  predicted (the calibrated prediction: the promise), how often the outcome came within
  the prediction, the refusals, and the confusion of would-refuse against missed-the-SLO
  (``--admission-shadow`` admits every request to measure both errors in one run).

A request whose wait in line ran out (QueueTimeout) missed the SLO; its realized time is
when it gave up, a lower bound (censored). Taken as exact, those lower bounds would
teach the correction that long waits come sooner than estimated, and let in requests
that then miss; so the correction's quantile is a Kaplan-Meier estimate, which counts a
censored ratio as "at least this".
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from kefu.limits.miss_curve import MISS_CONFIDENCE, MissCurve

# Recent outcomes kept: enough for a p90 to move by a sample or two, few enough to follow
# an engine whose speed changes (another tenant on the box, a longer mix of prompts).
WINDOW = 256
# Outcomes near the SLO needed before a prediction may refuse anyone: a fresh server
# admits and measures. One full set of slots of a default server (--parallel 8).
MIN_OUTCOMES = 8
# The share of the SLO from which an estimate is near it: its outcome calibrates.
NEAR_SHARE = 0.25
# How far past the SLO a prediction must lie to refuse on itself alone, where too few
# outcomes were estimated that long for the miss curve to say anything (under overload the
# requests estimated longest are refused, so their outcomes never come; on a fresh server
# there are none, and admitting everything there, a burst reads its long first turns at
# once and every one of them misses).
FAR_MARGIN = 2.0
# Why a request was (or would have been) refused: the miss curve said requests estimated
# alike mostly missed; past twice the SLO with no outcomes that long; a probe in flight
# on a fresh server (``Admission.judge``); or it waited in line past the moment a slot
# could still start it within the SLO (``Admission._deadline``). Each rule's precision is
# kept apart.
Rule = Literal["curve", "far", "probe", "late"]
RULES: tuple[Rule, ...] = ("curve", "far", "probe", "late")
# /metrics buckets of realized ÷ predicted.
RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)


def why(rule: Rule, missed_alike: float | None = None) -> str:
    """A refusal's rule in words (the debug log), with the curve's share where it decided."""
    if rule == "curve":
        return f"{missed_alike or 0:.0%} of requests estimated alike missed"
    if rule == "far":
        return "past twice the SLO, no outcomes this long"
    if rule == "late":
        return "no slot in time to start it within the SLO"
    return "a probe in flight"


@dataclass(frozen=True, slots=True)
class Outcome:
    estimate: float  # the rates' point estimate, seconds from the request's arrival
    predicted: float  # the calibrated prediction admission acted on (the promise)
    realized: float  # seconds from arrival to the first token (or to giving up)
    queued: bool  # met a queue at admission: the only place a prediction can refuse
    rule: Rule | None  # the rule that said refuse (admitted anyway: shadow, or no evidence)
    missed: bool  # realized over the SLO
    censored: bool = False  # gave up waiting: ``realized`` is a lower bound
    # Turned away at the line's deadline (``predicted``): a censored miss for the
    # correction and the miss curve (shadow measures that deadline right nine times in
    # ten), but no admitted request's outcome for the confusion.
    refused: bool = False

    def __str__(self) -> str:
        return (
            f"{self.estimate:.3f} s estimated, {self.predicted:.3f} s predicted, "
            f"{self.realized:.3f} s realized"
            + (", queued" if self.queued else "")
            + (f", would refuse ({self.rule})" if self.rule else "")
            + (", turned away" if self.refused else ", gave up waiting" if self.censored else "")
        )


def censored_quantile(values: list[tuple[float, bool]], q: float) -> float:
    """The ``q`` quantile of ``(value, censored)`` pairs, a censored value being a lower
    bound: Kaplan-Meier's product-limit estimate, the smallest observed value at which the
    share at or below reaches ``q``. Where the censored values leave it short of ``q``,
    the largest value of all, censored or not: a finite bound, not infinity, so a burst of
    give-ups cannot refuse everything until the window forgets them."""
    ordered = sorted(values, key=lambda pair: (pair[0], pair[1]))  # exact before censored
    at_risk, surviving = len(ordered), 1.0
    for value, censored in ordered:
        if not censored:
            surviving *= 1 - 1 / at_risk
            if 1 - surviving >= q - 1e-12:
                return value
        at_risk -= 1
    return ordered[-1][0]


def quantile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Confusion:
    """Would-refuse against missed-the-SLO, over admitted requests. A request that met no
    queue is never refused (there is no evidence to refuse on), so one that missed all the
    same counts against the recall."""

    admitted_missed: int = 0  # admitted and missed: a refusal the prediction owed
    admitted_made: int = 0
    # Of those admitted and missed, the ones that met no queue (a free slot, nothing to
    # read) and got their first token: no refusal was owed, the engine is that slow.
    missed_unqueued: int = 0
    # [missed, made] of the would-refuse requests, by the rule that said refuse.
    by_rule: dict[Rule, list[int]] = field(default_factory=lambda: {r: [0, 0] for r in RULES})

    @property
    def refused_missed(self) -> int:
        """Would-refuse requests that missed the SLO: true refusals."""
        return sum(missed for missed, _ in self.by_rule.values())

    @property
    def refused_made(self) -> int:
        """Would-refuse requests that made it: refusals that would have turned one away."""
        return sum(made for _, made in self.by_rule.values())

    def add(self, outcome: Outcome) -> None:
        if outcome.refused:
            return
        if outcome.rule is not None:
            self.by_rule[outcome.rule][0 if outcome.missed else 1] += 1
        elif outcome.missed:
            self.admitted_missed += 1
            self.missed_unqueued += not outcome.queued and not outcome.censored
        else:
            self.admitted_made += 1

    @property
    def precision(self) -> float | None:
        judged = self.refused_missed + self.refused_made
        return self.refused_missed / judged if judged else None

    @property
    def recall(self) -> float | None:
        missed = self.refused_missed + self.admitted_missed
        return self.refused_missed / missed if missed else None


@dataclass
class Histogram:
    """Cumulative counts of realized ÷ predicted, for /metrics."""

    buckets: tuple[float, ...] = RATIO_BUCKETS
    counts: list[int] = field(init=False)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)  # the last: over every bound

    def observe(self, value: float) -> None:
        index = next((i for i, bound in enumerate(self.buckets) if value <= bound), None)
        self.counts[len(self.buckets) if index is None else index] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, count at or below it) per bucket, "+Inf" last."""
        rows, running = [], 0
        for bound, count in zip((*map(str, self.buckets), "+Inf"), self.counts, strict=True):
            running += count
            rows.append((bound, running))
        return rows


class Outcomes:
    """The recent outcomes, the ratio quantile they give, and what they add up to."""

    def __init__(self, quantile: float, near: float, window: int = WINDOW) -> None:
        """``near``: the estimate (seconds) from which an outcome calibrates."""
        self.quantile = quantile
        self.near = near
        self.recent: deque[Outcome] = deque(maxlen=window)
        self.confusion = Confusion()
        self.ratios = Histogram()
        self.recorded = 0
        # Until the next outcome (every request is judged, some twice): the correction and
        # whether enough outcomes near the SLO stand behind it; the miss curve.
        self._calibration: tuple[float, bool] | None = None
        self._curve: MissCurve | None = None

    def near_slo(self) -> list[Outcome]:
        """The recent outcomes whose estimate was near the SLO: they calibrate."""
        return [o for o in self.recent if o.estimate >= self.near]

    def _calibrated(self) -> tuple[float, bool]:
        if self._calibration is None:
            ratios = [(o.realized / o.estimate, o.censored) for o in self.near_slo()]
            enough = len(ratios) >= MIN_OUTCOMES
            correction = censored_quantile(ratios, self.quantile) if enough else 1.0
            self._calibration = (correction, enough)
        return self._calibration

    def _miss_curve(self) -> MissCurve:
        """How often recent requests estimated like a given one missed the SLO."""
        if self._curve is None:
            self._curve = MissCurve((o.estimate, o.missed) for o in self.recent)
        return self._curve

    def refusal(
        self, estimate: float, predicted: float, slo: float
    ) -> tuple[Rule | None, float | None]:
        """The rule by which a request estimated at ``estimate`` (``predicted`` once
        corrected), queued as it is, is one to refuse, or None; and the miss curve's share
        for requests estimated alike (None where it was not asked). Past the SLO, where
        requests estimated alike mostly missed, or past twice the SLO where fewer than
        ``MIN_OUTCOMES`` were estimated this long (before ``MIN_OUTCOMES`` near the SLO, the
        only rule). A p90 past the SLO claims only that a request might miss: on that alone,
        at twice the engine's capacity, 70-92 % of would-be refusals missed; and twice the
        SLO on a q90 correction refused requests the curve had seen make it (70 %
        precision)."""
        if predicted <= slo:
            return None, None
        far = predicted > FAR_MARGIN * slo
        if not self.ready:
            return ("far" if far else None), None
        curve = self._miss_curve()
        missed = curve(estimate)
        if missed >= MISS_CONFIDENCE:
            return "curve", missed
        if far and curve.reaching(estimate) < MIN_OUTCOMES:
            return "far", missed
        return None, missed

    @property
    def ready(self) -> bool:
        """Enough outcomes near the SLO for a prediction to refuse on."""
        return self._calibrated()[1]

    def correction(self) -> float:
        """The factor from the rates' estimate to the prediction: the ``quantile`` of recent
        realized ÷ estimated near the SLO; 1 until there are enough of them."""
        return self._calibrated()[0]

    def add(self, outcome: Outcome) -> None:
        self.recent.append(outcome)
        self._calibration = self._curve = None
        self.recorded += 1
        self.confusion.add(outcome)
        if outcome.predicted > 0:
            self.ratios.observe(outcome.realized / outcome.predicted)

    def report(self) -> dict[str, object]:
        """The promise against the outcomes, over the recent window (/ready, /stats)."""
        ratios = [o.realized / o.predicted for o in self.recent if o.predicted > 0]
        near = [o.realized / o.predicted for o in self.near_slo() if o.predicted > 0]
        confusion = self.confusion
        return {
            "outcomes": len(self.recent),
            "recorded": self.recorded,
            "calibrated": self.ready,
            "quantile": self.quantile,
            "correction": round(self.correction(), 4),
            **_ratios(ratios),
            # Where refusals are decided: the predictions the correction was fitted to.
            "near_slo": {"outcomes": len(near), **_ratios(near)},
            "missed_slo": sum(o.missed for o in self.recent),
            "would_refuse": {
                "missed": confusion.refused_missed,
                "made": confusion.refused_made,
                "precision": _rounded(confusion.precision),
                "by_rule": {
                    rule: {"missed": missed, "made": made}
                    for rule, (missed, made) in confusion.by_rule.items()
                },
            },
            "admitted_missed": confusion.admitted_missed,
            "admitted_missed_unqueued": confusion.missed_unqueued,
            "recall": _rounded(confusion.recall),
        }


def _ratios(ratios: list[float]) -> dict[str, float | None]:
    """Realized ÷ predicted at p50 and p90, and the share within the prediction (about
    the quantile when the prediction is calibrated)."""
    if not ratios:
        return {"ratio_p50": None, "ratio_p90": None, "within_prediction": None}
    return {
        "ratio_p50": round(quantile(ratios, 0.5), 3),
        "ratio_p90": round(quantile(ratios, 0.9), 3),
        "within_prediction": round(sum(r <= 1 for r in ratios) / len(ratios), 3),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
