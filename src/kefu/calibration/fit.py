"""Calibrating the decision on a knowledge base: each probe goes through both looks as a
customer's message would (its left-out entries masked), and the shipped prior's
decision (``calibration/prior.py``) is measured on what the looks chose and whether it
was right: the expected curve on this knowledge base's own probes.

Not fitted on the probes: a decision fitted there (the weights, or only the prior's
intercept or thresholds) kept 67-100 % at a promised 95 % and served a fifth of what
the prior serves on customers' wording (``benchmarks/calibration_prior.py``).

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
    first_look_may_serve,
    second_features,
)
from kefu.calibration.model import CURVE_TARGETS, Calibration, Logistic, Stage, point_at
from kefu.calibration.prior import Prior, load_prior
from kefu.calibration.probes import Probe
from kefu.knowledge.base import Hit, KnowledgeBase
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry, answer_key
from kefu.knowledge.second_look import Nearest, SecondLook

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
    phrasings: Callable[[KbEntry], int],
) -> Observation:
    """What each look would have chosen for the probe, and whether that was right
    (``phrasings``: an entry's answer's questions that the probe leaves in)."""
    look = first_look(hits, probe.excluded)
    first: Seen | None = None
    if (
        look is not None
        and look.hit is not None
        and first_look_may_serve(phrasings(look.hit.entry))
    ):
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


def fit(
    observations: Sequence[Observation],
    target: float,
    fingerprint: str,
    prior: Prior | None = None,
) -> Calibration:
    prior = prior or load_prior()
    first = _stage(prior.first, [o.first for o in observations])
    second = _stage(prior.second, [o.second for o in observations])
    answerable = sum(o.probe.answer is not None for o in observations)
    curve = tuple(point_at(first, second, answerable, t) for t in CURVE_TARGETS)
    elsewhere = prior.measured_elsewhere(target)
    return Calibration(
        fingerprint=fingerprint,
        target=target,
        first=prior.first,
        second=prior.second,
        point=point_at(first, second, answerable, target),
        curve=curve,
        probes=dict(Counter(o.probe.kind for o in observations)),
        elsewhere={}
        if elsewhere is None
        else {"precision": elsewhere.precision, "coverage": elsewhere.coverage},
    )


def _stage(model: Logistic, seen: Sequence[Seen | None]) -> Stage:
    """Each probe's probability (-1 where the look had no candidate: never served)."""
    probability = np.full(len(seen), -1.0)
    right = np.zeros(len(seen), dtype=bool)
    for i, s in enumerate(seen):
        if s is not None:
            right[i] = s.right
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

    def phrasings(entry: KbEntry) -> int:
        return kb.phrasings(entry, probe.excluded)

    return observe(probe, found, nearest, kb.get, judge, phrasings)
