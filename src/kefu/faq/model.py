"""What decides for one knowledge base: the shipped prior's P(right) for each look's
candidate, and the threshold on it that this knowledge base's labels support.

The prior (``static/prior.json``, fitted by ``benchmarks/calibration_prior.py`` on
labelled customer wording of the tuning sets) ranks candidates: two logistic
regressions, one a look. Which P(right) keeps the promised precision *here* is not the
prior's to say (it kept 92 % at a promised 95 % on knowledge bases it was not fitted
on): the knowledge base's labels say it. ``Curve`` holds, for every threshold a label
sits at, how many labelled candidates reach it and how many of those are right; the
threshold for a target is the lowest of a grid whose Clopper-Pearson lower bound reaches the
target, testing from the highest threshold down and stopping at the first that fails
(fixed-sequence testing: scanning every threshold and keeping the best would pick a
lucky one); a threshold is tested once its labels are enough to pass (with a fallible
judge, more than ``needed``: ``Step.testable``). Where no threshold passes, the prior's
own conservative threshold decides (``Prior.fallback``: the lowest at which the tuning
sets' labels, pooled, reach it), unless the labels there rule the promise out (their
upper bound below it, or enough of them to test and their share below it): then nothing
is served.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

import numpy as np

from kefu.faq.bound import CONFIDENCE, needed, precision_lower_bound, precision_upper_bound

Look = Literal["first", "second"]
PRIOR_FILE = Path(__file__).parent / "static" / "prior.json"
MODEL_FILE = "faq_model.json"  # in the data dir, beside knowledge.db
METHOD = "labels-1"  # a stored model of another method is fitted again
NEVER = 1.01  # a threshold no probability reaches
# The thresholds tested, highest first: a coarse grid, so that one wrong label among the
# first few dozen does not end the test where a few more labels would have passed it.
GRID = tuple(round(1.0 - 0.005 * i, 3) for i in range(1, 200))


@dataclass(frozen=True, slots=True)
class Logistic:
    """P(the candidate is right) = sigmoid(weights . standardised features + bias)."""

    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def probability(self, features: Sequence[float]) -> float:
        x = (np.asarray(features, dtype=np.float64) - self.means) / self.scales
        z = float(x @ np.asarray(self.weights)) + self.bias
        return float(1.0 / (1.0 + np.exp(-min(max(z, -40.0), 40.0))))

    def highest(self, known: Sequence[float], bounds: Sequence[tuple[float, float]]) -> float:
        """The most P(right) can be when the features after ``known`` are not read yet
        but lie within ``bounds``: each at the end its weight favours."""
        rest = range(len(known), len(self.weights))
        unread = [
            high if self.weights[i] / self.scales[i] > 0 else low
            for i, (low, high) in zip(rest, bounds, strict=True)
        ]
        return self.probability((*known, *unread))

    @classmethod
    def of(cls, raw: dict[str, object]) -> Logistic:
        return cls(
            means=tuple(raw["means"]),  # type: ignore[arg-type]
            scales=tuple(raw["scales"]),  # type: ignore[arg-type]
            weights=tuple(raw["weights"]),  # type: ignore[arg-type]
            bias=float(raw["bias"]),  # type: ignore[arg-type]
        )


@dataclass(frozen=True, slots=True)
class Prior:
    first: Logistic
    second: Logistic
    fitted_on: str
    # Promised precision -> the lowest P(right) at which the tuning sets' labels, pooled,
    # keep it (Clopper-Pearson, fixed sequence): what serves before a knowledge base has
    # labels enough of its own. Missing for a target: nothing is served on the prior alone.
    fallback: dict[str, float]

    def look(self, look: Look) -> Logistic:
        return self.first if look == "first" else self.second

    def threshold(self, target: float) -> float:
        return self.fallback.get(f"{target:.2f}", NEVER)


@cache
def load_prior(path: Path = PRIOR_FILE) -> Prior:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return Prior(
        first=Logistic.of(raw["first"]),
        second=Logistic.of(raw["second"]),
        fitted_on=raw["fitted_on"],
        fallback={str(k): float(v) for k, v in raw.get("fallback", {}).items()},
    )


@dataclass(frozen=True, slots=True)
class Step:
    """Labelled candidates whose P(right) reaches ``threshold``, and the right ones."""

    threshold: float
    labelled: int
    right: int
    judged: int = 0  # of them, labelled by a judge (which may err), not known for sure

    def bound(self, confidence: float, judge_error: float) -> float:
        """The lower bound of precision, a judge's errors taken out: a judge wrong at
        rate e makes an observed share q of a true share t = (q - e) / (1 - 2e); with a
        mix, the judged share of the labels is corrected, the rest is not."""
        observed = precision_lower_bound(self.right, self.labelled, confidence)
        return self._corrected(observed, judge_error)

    def ceiling(self, confidence: float, judge_error: float) -> float:
        """The upper bound of precision, corrected as ``bound`` is."""
        observed = precision_upper_bound(self.right, self.labelled, confidence)
        return self._corrected(observed, judge_error)

    def refutes(self, target: float, confidence: float, judge_error: float) -> bool:
        """Whether these labels say the target fails here: their upper bound is below
        it, or they are enough to test it and their share of right ones is below it."""
        if not self.labelled:
            return False
        if self.ceiling(confidence, judge_error) < target:
            return True
        share = self._corrected(self.right / self.labelled, judge_error)
        return self.labelled >= needed(target, confidence) and share < target

    def _corrected(self, observed: float, judge_error: float) -> float:
        share = judge_error * self.judged / max(self.labelled, 1)
        return min(max((observed - share) / (1.0 - 2.0 * share), 0.0), 1.0)

    def testable(self, target: float, confidence: float, judge_error: float) -> bool:
        """Whether these labels are enough to test ``target``: answers all right, seen
        through a judge that errs at ``judge_error`` (the share it would call wrong, and
        one standard deviation more), would bound precision at the target. A test on
        fewer fails whatever the answers, and a failure ends the fixed sequence: with a
        fallible judge the top thresholds, labelled least, stopped every test (a 95 %
        promise was never served on a judge wrong 10 % of the time)."""
        if self.labelled < needed(target, confidence):
            return False
        share = judge_error * self.judged / self.labelled  # expected to look wrong
        spread = math.sqrt(share * (1.0 - share) / self.labelled)
        looks_wrong = math.ceil((share + spread) * self.labelled - 1e-9)
        best = Step(self.threshold, self.labelled, self.labelled - looks_wrong, self.judged)
        return best.bound(confidence, judge_error) >= target


@dataclass(frozen=True, slots=True)
class Point:
    """Where the decision serves, and what it stands on."""

    threshold: float
    source: Literal["labels", "prior", "none"]  # none: the labels say nothing keeps it
    labelled: int  # labelled candidates at or above the threshold
    right: int
    bound: float  # Clopper-Pearson lower bound of precision there (0 on the prior)


@dataclass(frozen=True, slots=True)
class Curve:
    """Every threshold a labelled candidate sits at, highest first, with the counts at
    or above it: all the fit needs of the labels, for any target."""

    steps: tuple[Step, ...]

    @classmethod
    def of(
        cls,
        probabilities: Sequence[float],
        right: Sequence[bool],
        judged: Sequence[bool] | None = None,
    ) -> Curve:
        flags = judged if judged is not None else [False] * len(right)
        order = sorted(zip(probabilities, right, flags, strict=True), key=lambda x: -x[0])
        steps: list[Step] = []
        hits = by_judge = 0
        for i, (p, ok, flag) in enumerate(order):
            hits += ok
            by_judge += flag
            if i + 1 == len(order) or order[i + 1][0] < p:
                steps.append(Step(p, i + 1, hits, by_judge))
        return cls(tuple(steps))

    def point(
        self,
        target: float,
        prior: Prior,
        confidence: float = CONFIDENCE,
        judge_error: float = 0.0,
    ) -> Point:
        chosen: Step | None = None
        for threshold in GRID:  # highest first; stop at the first that fails
            step = self.at(threshold)
            if not step.testable(target, confidence, judge_error):
                continue  # too few yet to test: not a failure
            if step.bound(confidence, judge_error) < target:
                break
            chosen = step
        if chosen is not None:
            bound = chosen.bound(confidence, judge_error)
            return Point(chosen.threshold, "labels", chosen.labelled, chosen.right, bound)
        fallback = prior.threshold(target)
        at = self.at(fallback)
        if at.refutes(target, confidence, judge_error):
            return Point(NEVER, "none", at.labelled, at.right, 0.0)
        return Point(fallback, "prior", at.labelled, at.right, 0.0)

    def at(self, threshold: float) -> Step:
        """The counts at or above ``threshold``, at the lowest labelled P(right) there
        (serving lower would rest on no label)."""
        reached = [step for step in self.steps if step.threshold >= threshold]
        return reached[-1] if reached else Step(threshold, 0, 0)


def operating_point(
    every: Curve, traffic: Curve, target: float, prior: Prior, judge_error: float
) -> Point:
    """Where to serve: where every label's bound reaches the target, and no lower than
    the prior's conservative threshold unless the labels from traffic alone reach it
    lower. The knowledge base's own phrasings hold no near miss of another topic (on the
    tuning sets they passed thresholds that kept 60-93 % of customers' messages), so they
    can hold the threshold up, never bring it down by themselves."""
    point = every.point(target, prior, judge_error=judge_error)
    if point.source != "labels":
        return point
    from_traffic = traffic.point(target, prior, judge_error=judge_error)
    by_traffic = from_traffic.threshold if from_traffic.source == "labels" else NEVER
    floor = min(by_traffic, prior.threshold(target))
    if floor <= point.threshold:
        return point
    at = every.at(floor) if floor < NEVER else Step(NEVER, 0, 0)
    source: Literal["labels", "prior"] = "labels" if floor == by_traffic < NEVER else "prior"
    return Point(floor, source, at.labelled, at.right, at.bound(CONFIDENCE, judge_error))


@dataclass(frozen=True, slots=True)
class Model:
    """What ``kefu kb calibrate`` (or the server, after a change or new labels) fitted to
    one state of the knowledge base and its labels, identified by ``fingerprint``."""

    fingerprint: str
    target: float
    point: Point
    curve: Curve  # every label
    labels: dict[str, int] = field(default_factory=dict)  # labels of each source
    judge_error: float = 0.0  # the rate at which the judge's verdicts were taken to err
    # The labels from traffic alone (a judge's verdicts, reviewed misses): customers'
    # own wording, near misses included, which the knowledge base's phrasings lack.
    traffic: Curve = field(default_factory=lambda: Curve(()))
    method: str = METHOD

    @classmethod
    def fitted(
        cls,
        fingerprint: str,
        target: float,
        probabilities: Sequence[float],
        right: Sequence[bool],
        labels: dict[str, int],
        prior: Prior | None = None,
        *,
        judged: Sequence[bool] | None = None,
        traffic: Sequence[bool] | None = None,
        judge_error: float = 0.0,
    ) -> Model:
        curve = Curve.of(probabilities, right, judged)
        flags = traffic if traffic is not None else [False] * len(right)
        chosen = [i for i, flag in enumerate(flags) if flag]
        by_traffic = Curve.of(
            [probabilities[i] for i in chosen],
            [right[i] for i in chosen],
            None if judged is None else [judged[i] for i in chosen],
        )
        point = operating_point(curve, by_traffic, target, prior or load_prior(), judge_error)
        return cls(fingerprint, target, point, curve, labels, judge_error, by_traffic)

    @classmethod
    def prior_only(cls, target: float, prior: Prior | None = None) -> Model:
        """Before any fit: the prior's conservative threshold."""
        curve = Curve(())
        return cls("", target, curve.point(target, prior or load_prior()), curve)

    def threshold(self, target: float) -> float:
        """Where the decision serves at ``target``: the fitted point at its own target."""
        if abs(target - self.target) < 1e-9:
            return self.point.threshold
        point = operating_point(self.curve, self.traffic, target, load_prior(), self.judge_error)
        return point.threshold

    def probability(self, look: Look, features: Sequence[float]) -> float:
        return load_prior().look(look).probability(features)

    def highest(
        self, look: Look, known: Sequence[float], bounds: Sequence[tuple[float, float]]
    ) -> float:
        return load_prior().look(look).highest(known, bounds)

    def summary(self) -> dict[str, object]:
        """What serves, for ``/ready`` and ``kefu kb stats``."""
        point = self.point
        at = self.curve.at(point.threshold)
        return {
            "target_precision": self.target,
            "serves_at": round(point.threshold, 4),
            "decided_by": point.source,
            "labels": self.labels,
            "labelled_candidates": self.curve.steps[-1].labelled if self.curve.steps else 0,
            "at_threshold": {"labelled": at.labelled, "right": at.right},
            "precision_lower_bound": round(point.bound, 4),
            "from_traffic": self.traffic.steps[-1].labelled if self.traffic.steps else 0,
            "judge_error": self.judge_error,
            "confidence": CONFIDENCE,
            # Which state of the knowledge base and labels it was fitted to.
            "fingerprint": self.fingerprint,
        }

    def save(self, path: Path) -> None:
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(self)), encoding="utf-8")
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> Model | None:
        """None when there is none, or it cannot be read (it is fitted again)."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("method") != METHOD:
                return None
            return cls(
                fingerprint=raw["fingerprint"],
                target=raw["target"],
                point=Point(**raw["point"]),
                curve=Curve(tuple(Step(**step) for step in raw["curve"]["steps"])),
                labels=raw.get("labels", {}),
                judge_error=raw.get("judge_error", 0.0),
                traffic=Curve(tuple(Step(**step) for step in raw["traffic"]["steps"])),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
