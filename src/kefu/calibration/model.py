"""The fast path's decision as a model: two logistic regressions (the first look's
retrieval features, the second look's) giving P(right), served where it reaches the
precision the operator promised. The weights are the shipped prior
(``calibration/prior.py``), fitted on customers' wording; a knowledge base's probes
measure what that decision does on its own entries.

Plain numpy (Newton's method on an L2-penalised log-loss): a few hundred probes and
half a dozen features fit in milliseconds, and the result is a handful of numbers
stored as JSON with the knowledge base.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

# The L2 penalty on standardised weights: enough to keep a feature that separates the
# probes perfectly (an objection of the guard) from an infinite weight.
PENALTY = 1.0
NEWTON_STEPS = 25
# The curve printed by ``kefu kb calibrate`` and shown by ``kefu kb stats``.
CURVE_TARGETS = (0.8, 0.85, 0.9, 0.95, 0.97, 0.99)
CALIBRATION_FILE = "calibration.json"  # in the data dir, beside knowledge.db
# How the decision was made: a stored calibration of another method is fitted again.
METHOD = "prior-3"


@dataclass(frozen=True, slots=True)
class Logistic:
    """P(the candidate is right) = sigmoid(weights . standardised features + bias)."""

    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    @classmethod
    def fit(
        cls,
        features: Floats,
        labels: npt.NDArray[np.bool_],
        signs: Sequence[int] | None = None,
    ) -> Logistic:
        """Fitted by Newton's method. ``signs`` (+1, -1 or 0 per feature) says which way
        a feature may move P(right): one whose best weight has the other sign is left
        out and the rest fitted again, until every weight agrees. On customers' wording
        of one set of knowledge bases a word the knowledge base never uses came out
        *raising* P(right); on another set such words marked the near misses."""
        free = np.ones(features.shape[1], dtype=bool)
        while True:
            model = cls._fit(features, labels, free)
            signed = zip(model.weights, signs, strict=True) if signs is not None else ()
            wrong = [i for i, (weight, sign) in enumerate(signed) if weight * sign < 0]
            if not wrong:
                return model
            free[wrong] = False

    @classmethod
    def _fit(
        cls, features: Floats, labels: npt.NDArray[np.bool_], free: npt.NDArray[np.bool_]
    ) -> Logistic:
        """The fit over the ``free`` features; the others weigh nothing."""
        means = features.mean(axis=0)
        scales = np.maximum(features.std(axis=0), 1e-6)
        x = np.hstack([((features - means) / scales)[:, free], np.ones((len(features), 1))])
        y = labels.astype(np.float64)
        w = np.zeros(x.shape[1])
        penalty = np.full(x.shape[1], PENALTY)
        penalty[-1] = 0.0  # the bias is not penalised
        for _ in range(NEWTON_STEPS):
            p = _sigmoid(x @ w)
            gradient = x.T @ (p - y) + penalty * w
            hessian = (x.T * (p * (1 - p))) @ x + np.diag(penalty + 1e-9)
            step = np.linalg.solve(hessian, gradient)
            w -= step
            if float(np.abs(step).max()) < 1e-8:
                break
        weights = np.zeros(features.shape[1])
        weights[free] = w[:-1]
        return cls(
            tuple(map(float, means)),
            tuple(map(float, scales)),
            tuple(map(float, weights)),
            float(w[-1]),
        )

    def probability(self, features: Sequence[float] | Floats) -> Floats:
        x = np.atleast_2d(np.asarray(features, dtype=np.float64))
        z = ((x - np.asarray(self.means)) / np.asarray(self.scales)) @ np.asarray(self.weights)
        return _sigmoid(z + self.bias)

    def highest(self, known: Sequence[float], bounds: Sequence[tuple[float, float]]) -> float:
        """The most P(right) can be when the features after ``known`` are not read yet
        but lie within ``bounds``: each at the end its weight favours (per unit of the
        feature itself, so over its scale)."""
        rest = range(len(known), len(self.weights))
        unread = [
            high if self.weights[i] / self.scales[i] > 0 else low
            for i, (low, high) in zip(rest, bounds, strict=True)
        ]
        return float(self.probability((*known, *unread))[0])


def _sigmoid(z: Floats) -> Floats:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -40, 40))), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Point:
    """Thresholds on each look's probability, and what they did on the probes."""

    first: float
    second: float
    precision: float
    coverage: float  # right answers served / probes with an answer in the knowledge base
    served: int


@dataclass(frozen=True, slots=True)
class Stage:
    """One look's probes: its probability for each, and whether its candidate was right."""

    probability: Floats
    right: npt.NDArray[np.bool_]


def point_at(first: Stage, second: Stage | None, answerable: int, target: float) -> Point:
    """What serving at ``target`` does on these messages: the first look's answer where
    its probability reaches the target, else the second look's where its does."""
    by_first = first.probability >= target
    served, right = int(by_first.sum()), int((by_first & first.right).sum())
    if second is not None:
        by_second = ~by_first & (second.probability >= target)
        served += int(by_second.sum())
        right += int((by_second & second.right).sum())
    precision = right / served if served else 1.0
    return Point(target, target, precision, right / max(answerable, 1), served)


@dataclass(frozen=True, slots=True)
class Calibration:
    """What ``kefu kb calibrate`` (or the server, after a change) fitted to one state of
    the knowledge base, identified by ``fingerprint``."""

    fingerprint: str
    target: float
    first: Logistic | None  # None: too few probes of one kind to learn from; never serves
    second: Logistic | None
    point: Point
    curve: tuple[Point, ...]  # the operating point at each of ``CURVE_TARGETS``
    probes: dict[str, int] = field(default_factory=dict)  # how many of each kind
    # What the prior kept at this target on customers' wording of knowledge bases it
    # was not fitted on (precision, coverage): the expectation for real traffic, where
    # ``point`` is the probes'.
    elsewhere: dict[str, float] = field(default_factory=dict)
    method: str = METHOD

    def first_serves(self, features: Sequence[float]) -> tuple[bool, float]:
        """Whether the first look's answer may be served, and its probability of being right."""
        return _serves(self.first, self.point.first, features)

    def second_serves(self, features: Sequence[float]) -> tuple[bool, float]:
        return _serves(self.second, self.point.second, features)

    def first_may_serve(
        self, known: Sequence[float], bounds: Sequence[tuple[float, float]]
    ) -> tuple[bool, float]:
        """Whether the first look's answer could be served whatever the features after
        ``known`` say within ``bounds``, and the most its probability can be: below the
        threshold, the costlier features need not be read."""
        if self.first is None:
            return False, 0.0
        highest = self.first.highest(known, bounds)
        return highest >= self.point.first, highest

    def summary(self) -> dict[str, object]:
        """The operating point, for ``/ready`` and ``kefu kb stats``."""
        return {
            "target_precision": self.target,
            # On this knowledge base's probes (optimistic: easier than customers).
            "expected_precision": round(self.point.precision, 4),
            "expected_coverage": round(self.point.coverage, 4),
            # On customers' wording of other knowledge bases (leave one out).
            "measured_elsewhere": self.elsewhere,
            "probes": self.probes,
            # Which state of the knowledge base it was fitted to: a change is calibrated
            # once /ready shows the new one.
            "fingerprint": self.fingerprint,
        }

    def save(self, path: Path) -> None:
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(self)), encoding="utf-8")
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> Calibration | None:
        """None when there is none, or it cannot be read (it is fitted again)."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("method") != METHOD:
                return None
            first, second = raw["first"], raw["second"]
            return cls(
                fingerprint=raw["fingerprint"],
                target=raw["target"],
                first=None if first is None else logistic(first),
                second=None if second is None else logistic(second),
                point=Point(**raw["point"]),
                curve=tuple(Point(**point) for point in raw["curve"]),
                probes=raw.get("probes", {}),
                elsewhere=raw.get("elsewhere", {}),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _serves(
    model: Logistic | None, threshold: float, features: Sequence[float]
) -> tuple[bool, float]:
    if model is None:
        return False, 0.0
    p = float(model.probability(features)[0])
    return p >= threshold, p


def logistic(raw: dict[str, object]) -> Logistic:
    return Logistic(
        means=tuple(raw["means"]),  # type: ignore[arg-type]
        scales=tuple(raw["scales"]),  # type: ignore[arg-type]
        weights=tuple(raw["weights"]),  # type: ignore[arg-type]
        bias=float(raw["bias"]),  # type: ignore[arg-type]
    )
