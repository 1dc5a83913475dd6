"""Admission's predictions beside what then happened, and the correction they give.

Every admitted request's predicted first-token time is kept beside its realized one. Two
uses:

- **Correction.** The rates' model (``rates.py``) gives a point estimate from assumptions
  (prompts read one after another, a slot freeing every service/slots seconds). What the
  engine really does (several prompts read in one step, the prefix cache skipping most of
  a repeated prompt) shows in the ratio realized / estimated, so the prediction admission
  acts on is the estimate times a quantile of the recent ratios: a conformal correction,
  not a formula's upper bound. Ratios of requests that met a queue (a slot to wait for or
  prompts ahead) are the ones used where there are enough of them: refusals are decided
  only there, and an idle engine's ratio says little about a busy one's.
- **The promise checked.** ``report`` gives the recent median and p90 of realized ÷
  predicted (the calibrated prediction: the promise), how often the outcome came within
  the prediction, the refusals, and the confusion of would-refuse against missed-the-SLO
  (``--admission-shadow`` admits every request to measure both errors in one run).

A request whose wait in line ran out (QueueTimeout) missed the SLO; its realized time is
when it gave up, a lower bound.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

# Recent outcomes kept: enough for a p90 to move by a sample or two, few enough to follow
# an engine whose speed changes (another tenant on the box, a longer mix of prompts).
WINDOW = 256
# Outcomes needed before a prediction may refuse anyone: a fresh server admits and
# measures. One full set of slots of a default server (--parallel 8).
MIN_OUTCOMES = 8
# /metrics buckets of realized ÷ predicted.
RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class Outcome:
    estimate: float  # the rates' point estimate, seconds from the request's arrival
    predicted: float  # the calibrated prediction admission acted on (the promise)
    realized: float  # seconds from arrival to the first token (or to giving up)
    queued: bool  # met a queue at admission: the only place a prediction can refuse
    would_refuse: bool  # the prediction said refuse (admitted anyway: shadow, or no evidence)
    missed: bool  # realized over the SLO


def quantile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Confusion:
    """Would-refuse against missed-the-SLO, over admitted requests. A request that met no
    queue is never refused (there is no evidence to refuse on), so one that missed all the
    same counts against the recall."""

    refused_missed: int = 0  # true refusals
    refused_made: int = 0  # would have refused a request that made it
    admitted_missed: int = 0  # admitted and missed: a refusal the prediction owed
    admitted_made: int = 0

    def add(self, outcome: Outcome) -> None:
        if outcome.would_refuse:
            if outcome.missed:
                self.refused_missed += 1
            else:
                self.refused_made += 1
        elif outcome.missed:
            self.admitted_missed += 1
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

    def __init__(self, quantile: float, window: int = WINDOW) -> None:
        self.quantile = quantile
        self.recent: deque[Outcome] = deque(maxlen=window)
        self.confusion = Confusion()
        self.ratios = Histogram()
        self.recorded = 0
        self._correction: float | None = None  # until the next outcome: judged per request

    @property
    def ready(self) -> bool:
        """Enough outcomes for a prediction to refuse on."""
        return len(self.recent) >= MIN_OUTCOMES

    def correction(self) -> float:
        """The factor from the rates' estimate to the prediction: the ``quantile`` of recent
        realized ÷ estimated, over requests that met a queue where there are enough of
        them; 1 with no outcomes."""
        if self._correction is None:
            self._correction = self._fit()
        return self._correction

    def _fit(self) -> float:
        queued = [o for o in self.recent if o.queued]
        judged = queued if len(queued) >= MIN_OUTCOMES else list(self.recent)
        ratios = [o.realized / o.estimate for o in judged if o.estimate > 0]
        return quantile(ratios, self.quantile) if ratios else 1.0

    def add(self, outcome: Outcome) -> None:
        self.recent.append(outcome)
        self._correction = None
        self.recorded += 1
        self.confusion.add(outcome)
        if outcome.predicted > 0:
            self.ratios.observe(outcome.realized / outcome.predicted)

    def report(self) -> dict[str, object]:
        """The promise against the outcomes, over the recent window (/ready, /stats)."""
        ratios = [o.realized / o.predicted for o in self.recent if o.predicted > 0]
        confusion = self.confusion
        return {
            "outcomes": len(self.recent),
            "recorded": self.recorded,
            "calibrated": self.ready,
            "quantile": self.quantile,
            "correction": round(self.correction(), 4),
            "ratio_p50": round(quantile(ratios, 0.5), 3) if ratios else None,
            "ratio_p90": round(quantile(ratios, 0.9), 3) if ratios else None,
            # Share of outcomes that came within their prediction: about ``quantile`` when
            # the prediction is calibrated.
            "within_prediction": round(sum(r <= 1 for r in ratios) / len(ratios), 3)
            if ratios
            else None,
            "missed_slo": sum(o.missed for o in self.recent),
            "would_refuse": {
                "missed": confusion.refused_missed,
                "made": confusion.refused_made,
                "precision": _rounded(confusion.precision),
            },
            "admitted_missed": confusion.admitted_missed,
            "recall": _rounded(confusion.recall),
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
