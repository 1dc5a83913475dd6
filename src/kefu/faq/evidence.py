"""What the decision reads of a message's looks: the same features for a customer's
message while serving and for a label while calibrating, so the estimate the
calibration measures is the one serving applies.

First look (the static word table and BM25, a millisecond): the best answer's fused
score, its lead over the next answer, its lexical and dense parts. Second look
(multilingual-e5-small): the nearest question's cosine, its lead over the next answer
and over the nearest passage sentence; the chosen answer read as a passage, its cosine
and its lead over the other answers', and whether it leads at all. Both add the FAQ
guard's findings on their answer: whether it objects, and whether because of words the
knowledge base never uses or because the entry is about something else (an opposite
picked, a subject swapped); the counts of unknown words and of words foreign to the
answer; a negation on one side only; and how near the message's least covered word comes
to the answer's words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kefu.faq.guard import Concern, Objection
from kefu.knowledge.base import Hit
from kefu.knowledge.entries import answer_key
from kefu.knowledge.second_look import Nearest

Features = tuple[float, ...]
# A lead over the passages past this is as good as any: a knowledge base without
# passages has none to lead, and its leads must not dwarf the others'.
CONTEXT_LEAD_CAP = 0.2
# A negation in English or Chinese (非 is left out: 非常 is "very").
_NEGATION = re.compile(r"\b(?:not|no|never|without|cannot)\b|n't|[不没无别未]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Findings:
    """What the FAQ guard and the words say about one message and one entry."""

    objection: Objection | None  # the guard's
    unknown: int  # content words the knowledge base never uses
    foreign: int  # content words it uses, but not in this answer
    negation: bool  # one of the message and the entry's question is negated, not both
    # How near the message's least covered content word comes to the answer's words
    # (1.0: the answer uses them all).
    weakest: float

    def features(self) -> Features:
        concern = None if self.objection is None else self.objection.concern
        return (
            float(concern is not None),
            float(concern is Concern.UNKNOWN_WORDS),
            float(min(self.unknown, 3)),
            float(min(self.foreign, 3)),
            float(self.negation),
            # An opposite picked or a subject swapped: on the dev sets nearly always a
            # near miss, where the guard's other objections often stop paraphrases.
            float(concern is Concern.ABOUT_ELSE),
            self.weakest,
        )


# What each of ``Findings.features`` can be, in its order: before the guard has read a
# message, the best its findings could say (``Logistic.highest``).
FINDINGS_BOUNDS = (
    (0.0, 1.0),
    (0.0, 1.0),
    (0.0, 3.0),
    (0.0, 3.0),
    (0.0, 1.0),
    (0.0, 1.0),
    (0.0, 1.0),
)


def negation_differs(message: str, question: str) -> bool:
    return bool(_NEGATION.search(message)) != bool(_NEGATION.search(question))


@dataclass(frozen=True, slots=True)
class FirstLook:
    """The first look's best answer: ``hit`` is its best phrasing, None when a passage
    leads (context for the LLM, not an answer)."""

    hit: Hit | None
    lead: float


def first_look_may_serve(phrasings: int) -> bool:
    """Whether the first look may serve an answer with this many questions.

    With one, it leaves the answer to the second look: words alone cannot tell a
    near miss, which keeps the question's words and changes one ("international" for
    "domestic"), from a paraphrase, which keeps the meaning in other words.
    """
    return phrasings > 1


def first_look(hits: Sequence[Hit], excluded: frozenset[str] = frozenset()) -> FirstLook | None:
    """The best answer among the hits, leaving ``excluded`` entries out."""
    ranked = sorted((hit for hit in hits if hit.entry.id not in excluded), key=lambda h: -h.score)
    if not ranked:
        return None
    best: dict[str, Hit] = {}
    for hit in ranked:
        if hit.entry.kind == "faq":
            best.setdefault(answer_key(hit.entry.answer), hit)
    if ranked[0].entry.kind != "faq" or not best:
        return FirstLook(None, 0.0)
    leaders = list(best.values())
    runner_up = leaders[1].score if len(leaders) > 1 else 0.0
    return FirstLook(leaders[0], leaders[0].score - runner_up)


def first_retrieval(hit: Hit, lead: float) -> Features:
    """The first look's features that retrieval gives, before the guard's findings."""
    return (hit.score, lead, hit.lexical, hit.dense)


def second_features(nearest: Nearest, findings: Findings) -> Features:
    lead = min(nearest.over_context, CONTEXT_LEAD_CAP)
    by_answer = (
        nearest.answer_similarity,
        nearest.answer_margin,
        float(nearest.answer_margin > 0),
    )
    return (nearest.similarity, nearest.margin, lead, *by_answer, *findings.features())
