"""Fitting the decision to a knowledge base from its labels (``faq/labels.py``): each
label goes through both looks as a customer's message would (its held-out entries
masked), each look's candidate is scored by the prior and judged by the label, and the
threshold the labels support is chosen (``faq/model.py``).

``observe`` is one label; ``fit`` the whole set. The server runs the labels in small
chunks in the background (``service/calibration.py``); ``kefu kb calibrate`` in one go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kefu.faq.decide import HITS, Evidence, first, second
from kefu.faq.labels import Label
from kefu.faq.model import Model, load_prior
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import answer_key
from kefu.knowledge.second_look import SecondLook
from kefu.text.message import read_message
from kefu.text.words import language


@dataclass(frozen=True, slots=True)
class Scored:
    """One look's candidate for a label: its P(right), and whether it was right."""

    probability: float
    right: bool
    judged: bool = False  # a judge's verdict, which may err
    traffic: bool = False  # a customer's message (a judge's verdict, a reviewed miss)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One look's candidate for a message that the decision could serve."""

    look: str
    probability: float
    answer: str  # its answer key


def candidates(
    kb: KnowledgeBase,
    look: SecondLook | None,
    text: str,
    vector: Vectors | None,
    excluded: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """Each look's candidate for a message, scored by the prior, where its answer is in
    the message's language (in another, it is never served)."""
    message = read_message(text)
    hits = kb.search(message, k=HITS + len(excluded))
    found: list[Evidence | None] = [first(kb, message, hits, excluded=excluded)]
    if look is not None and vector is not None:
        nearest = look.nearest(vector, excluded)
        found.append(None if nearest is None else second(kb, message, nearest))
    prior = load_prior()
    return [
        Candidate(
            evidence.look,
            prior.look(evidence.look).probability(evidence.features),
            answer_key(evidence.entry.answer),
        )
        for evidence in found
        if evidence is not None and language(evidence.entry.answer) == evidence.lang
    ]


def judged(label: Label, found: Sequence[Candidate]) -> list[Scored]:
    """The candidates the label says something about, with what it says."""
    scored = []
    for candidate in found:
        right = label.verdict(candidate.answer)
        if right is not None:
            judge = label.source == "judge"
            scored.append(
                Scored(candidate.probability, right, judge, judge or label.source == "review")
            )
    return scored


def observe(
    kb: KnowledgeBase, look: SecondLook | None, label: Label, vector: Vectors | None
) -> list[Scored]:
    """A label through both looks, its held-out entries masked."""
    return judged(label, candidates(kb, look, label.text, vector, label.excluded))


def fit(
    labels: Sequence[Label],
    scored: Sequence[Sequence[Scored]],
    target: float,
    fingerprint: str,
    judge_error: float = 0.0,
) -> Model:
    """The model these labels support; ``scored[i]`` are ``labels[i]``'s candidates;
    ``judge_error``: the rate at which the judge's verdicts are taken to err."""
    flat = [s for candidates in scored for s in candidates]
    counts: dict[str, int] = dict(Counter(label.source for label in labels))
    return Model.fitted(
        fingerprint,
        target,
        [s.probability for s in flat],
        [s.right for s in flat],
        counts,
        judged=[s.judged for s in flat],
        traffic=[s.traffic for s in flat],
        judge_error=judge_error,
    )
