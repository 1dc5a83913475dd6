"""Fitting the decision to a knowledge base: each probe goes through both looks as a
customer's message would (its left-out entries masked), and the two models and their
thresholds are fitted to what the looks chose and whether it was right.

``observe`` is one probe; ``fit`` the whole set. The server runs the probes in small
chunks in the background (``service/calibration.py``); ``kefu kb calibrate`` runs
them in one go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kefu.calibration.features import (
    Features,
    Findings,
    first_features,
    first_look,
    second_features,
)
from kefu.calibration.model import CURVE_TARGETS, Calibration, Logistic, Stage, operating_point
from kefu.calibration.probes import Probe
from kefu.knowledge.base import Hit, KnowledgeBase
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry, answer_key
from kefu.knowledge.second_look import Nearest, SecondLook

# A look with fewer right (or wrong) candidates than this among the probes has nothing
# to learn from: it serves nothing.
MIN_EACH = 5

# The guard's and the words' findings on a message and an entry.
Judge = Callable[[str, KbEntry], Findings]


@dataclass(frozen=True, slots=True)
class Seen:
    features: Features
    right: bool


@dataclass(frozen=True, slots=True)
class Observation:
    probe: Probe
    first: Seen | None
    second: Seen | None


def observe(
    probe: Probe,
    hits: Sequence[Hit],
    nearest: Nearest | None,
    entry_of: Callable[[str], KbEntry | None],
    judge: Judge,
) -> Observation:
    """What each look would have chosen for the probe, and whether that was right."""
    look = first_look(hits, probe.excluded)
    first: Seen | None = None
    if look is not None and look.hit is not None:
        entry = look.hit.entry
        features = first_features(look.hit, look.lead, judge(probe.text, entry))
        first = Seen(features, answer_key(entry.answer) == probe.answer)
    second: Seen | None = None
    chosen = None if nearest is None else entry_of(nearest.entry_id)
    if nearest is not None and chosen is not None:
        key = answer_key(chosen.answer)
        features = second_features(nearest, judge(probe.text, chosen))
        second = Seen(features, key == probe.answer)
    return Observation(probe, first, second)


def fit(observations: Sequence[Observation], target: float, fingerprint: str) -> Calibration:
    first_model = _fit([o.first for o in observations])
    second_model = _fit([o.second for o in observations])
    first = _stage(first_model, [o.first for o in observations])
    second = _stage(second_model, [o.second for o in observations])
    answerable = sum(o.probe.answer is not None for o in observations)
    curve = tuple(operating_point(first, second, answerable, t) for t in CURVE_TARGETS)
    return Calibration(
        fingerprint=fingerprint,
        target=target,
        first=first_model,
        second=second_model,
        point=operating_point(first, second, answerable, target),
        curve=curve,
        probes=dict(Counter(o.probe.kind for o in observations)),
    )


def _fit(seen: Sequence[Seen | None]) -> Logistic | None:
    present = [s for s in seen if s is not None]
    rights = sum(s.right for s in present)
    if rights < MIN_EACH or len(present) - rights < MIN_EACH:
        return None
    features = np.array([s.features for s in present], dtype=np.float64)
    return Logistic.fit(features, np.array([s.right for s in present]))


def _stage(model: Logistic | None, seen: Sequence[Seen | None]) -> Stage:
    """Each probe's probability (-1 where the look had no candidate: never served)."""
    probability = np.full(len(seen), -1.0)
    right = np.zeros(len(seen), dtype=bool)
    for i, s in enumerate(seen):
        if s is not None:
            right[i] = s.right
            if model is not None:
                probability[i] = float(model.probability(s.features)[0])
    return Stage(probability, right)


def probe_once(
    kb: KnowledgeBase,
    look: SecondLook | None,
    probe: Probe,
    vector: Vectors | None,
    judge: Judge,
    *,
    hits: int,
) -> Observation:
    """One probe through both looks, its left-out entries masked: the first look's
    search reaches ``hits`` past them."""
    found = kb.search(probe.text, k=hits + len(probe.excluded))
    nearest = None if look is None or vector is None else look.nearest(vector, probe.excluded)
    return observe(probe, found, nearest, kb.get, judge)
