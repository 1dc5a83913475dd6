"""The decision on a knowledge-base answer: each look's candidate with its evidence, and
one pure ``decide(evidence, model, target) -> Verdict``.

A message's way here: the first look (word table and BM25, a millisecond: ``first``)
gives its best answer with retrieval's features; the guard (``faq/guard.py``) reads the
message against that entry only where its findings could still change the verdict (they
can only lower P(right), so retrieval's features with every finding at its best bound
it: an answer that bound leaves below the threshold is declined unread). Where the first
look declines, the second look (multilingual-e5-small on its own thread: ``second``)
gives its nearest answer with e5's features and the guard's findings. ``decide`` turns
either into a verdict: served where the model's P(right) reaches the threshold the
knowledge base's labels support for the promised precision, in the message's language.

Everything here that reads the knowledge base runs under its lock (the fast path's
lookup or its worker thread), as every reader of it does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kefu.faq.evidence import (
    FINDINGS_BOUNDS,
    Features,
    Findings,
    first_look,
    first_look_may_serve,
    first_retrieval,
    negation_differs,
    second_features,
)
from kefu.faq.guard import faq_objection, word_evidence
from kefu.faq.model import Look, Model
from kefu.knowledge.base import Hit, KnowledgeBase
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.second_look import Nearest
from kefu.text.message import Message, as_message
from kefu.text.words import language

# Hits the first look weighs: enough that the best answers' other phrasings are among them.
HITS = 64


@dataclass(frozen=True, slots=True)
class Evidence:
    """One look's candidate for a message, and what the looks found about it."""

    look: Look
    entry: KbEntry
    retrieval: Features  # the look's own scores
    findings: Findings | None  # the guard's; None: not read (it could not change the verdict)
    lead: float  # over the next answer
    lang: str  # the message's language

    @property
    def features(self) -> Features:
        assert self.findings is not None
        return (*self.retrieval, *self.findings.features())


@dataclass(frozen=True, slots=True)
class Verdict:
    serve: bool
    probability: float  # the prior's P(right); an upper bound when the guard was not read
    reason: str | None  # why not, for the route and the miss log


def decide(evidence: Evidence, model: Model, target: float) -> Verdict:
    """Serve the candidate where its P(right) reaches the threshold for ``target`` and
    its answer is in the message's language."""
    threshold = model.threshold(target)
    look = evidence.look
    if evidence.findings is None:
        p = model.highest(look, evidence.retrieval, FINDINGS_BOUNDS)
        return Verdict(False, p, f"{look} look: p at most {p:.2f} < {threshold:.2f}")
    p = model.probability(look, evidence.features)
    if p < threshold:
        objection = evidence.findings.objection
        why = "" if objection is None else f" ({objection.sentence})"
        return Verdict(False, p, f"{look} look: p {p:.2f} < {threshold:.2f}{why}")
    answer_lang = language(evidence.entry.answer)
    if answer_lang != evidence.lang:
        return Verdict(False, p, f"the answer is in {answer_lang}, the message {evidence.lang}")
    return Verdict(True, p, None)


def findings(kb: KnowledgeBase, message: str | Message, entry: KbEntry) -> Findings:
    """The guard's objection and the words' evidence on one entry."""
    message = as_message(message)
    answer = kb.answer(entry)
    objection = faq_objection(
        message, entry, kb_words=kb.vocabulary, answer=answer, catalogue=kb.catalogue
    )
    unknown, foreign, weakest = word_evidence(message, kb.vocabulary, answer)
    negated = negation_differs(message.folded, entry.question)
    return Findings(objection, unknown, foreign, negated, weakest)


# Whether the guard is worth reading, given retrieval's features: it can only lower P(right).
WorthReading = Callable[[Features], bool]


def always(_: Features) -> bool:
    return True


def first(
    kb: KnowledgeBase,
    message: Message,
    hits: list[Hit],
    *,
    worth_reading: WorthReading = always,
    excluded: frozenset[str] = frozenset(),
) -> Evidence | None:
    """The first look's best answer, if it is one the first look may serve: an FAQ on
    top, with more than one question (with one, words cannot tell a near miss from a
    paraphrase: the second look judges it)."""
    seen = first_look(hits, excluded)
    if seen is None or seen.hit is None:
        return None
    entry = seen.hit.entry
    if not first_look_may_serve(kb.phrasings(entry, excluded)):
        return None
    retrieval = first_retrieval(seen.hit, seen.lead)
    found = findings(kb, message, entry) if worth_reading(retrieval) else None
    return Evidence("first", entry, retrieval, found, seen.lead, message.lang)


def second(kb: KnowledgeBase, message: str | Message, nearest: Nearest) -> Evidence | None:
    """The second look's nearest answer; None when it is gone since."""
    entry = kb.get(nearest.entry_id)
    if entry is None:
        return None
    message = as_message(message)
    found = findings(kb, message, entry)
    features = second_features(nearest, found)
    retrieval = features[: len(features) - len(found.features())]
    return Evidence("second", entry, retrieval, found, nearest.margin, message.lang)
