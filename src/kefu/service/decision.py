"""The fast path's decision on a knowledge-base answer: the FAQ guard against this
knowledge base, the calibrated estimate of the first and the second look, and the
probing the background fit (``service/calibration.py``) runs on the same evidence.

Those that read the knowledge base run under its lock (``FastPath``'s lookup or its
worker thread), as every reader of it does.
"""

from __future__ import annotations

from dataclasses import replace

from kefu.calibration.features import (
    FINDINGS_BOUNDS,
    Findings,
    FirstLook,
    first_look_may_serve,
    first_retrieval,
    negation_differs,
    second_features,
)
from kefu.calibration.fit import Observation, probe_once
from kefu.calibration.model import Calibration
from kefu.calibration.probes import Probe
from kefu.fastpath.faq_guard import faq_objection, word_evidence
from kefu.fastpath.router import Candidate, Routing, Rules
from kefu.knowledge.base import Hit, KnowledgeBase
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.second_look import Nearest, Pick, SecondLook
from kefu.service.plan import Plan, Source
from kefu.service.second_look import Incidental
from kefu.text.message import Message, as_message
from kefu.text.words import language

# Hits the router weighs: enough that the best answers' second phrasings are among them
# (the demo has about a dozen phrasings per answer).
ROUTER_HITS = 64


def objection(
    kb: KnowledgeBase,
    message: Message,
    entry: KbEntry,
    *,
    incidental: Incidental | None = None,
) -> str | None:
    """The FAQ guard, against this knowledge base (``faq_objection``)."""
    return faq_objection(
        message,
        entry,
        kb_words=kb.vocabulary,
        answer=kb.answer(entry),
        catalogue=kb.catalogue,
        incidental=incidental,
    )


def findings(kb: KnowledgeBase, message: str | Message, entry: KbEntry) -> Findings:
    """The guard's objection and the words' evidence, for the calibrated decision
    (a probe of the calibration comes as text)."""
    message = as_message(message)
    objected = objection(kb, message, entry)
    unknown, foreign, weakest = word_evidence(message, kb.vocabulary, kb.answer(entry))
    negated = negation_differs(message.folded, entry.question)
    return Findings(objected, unknown, foreign, negated, weakest)


def judge(
    kb: KnowledgeBase, message: Message, pick: Pick, incidental: Incidental
) -> tuple[KbEntry, str | None] | None:
    """The FAQ guard's objection to the picked entry; None when it is gone since."""
    entry = kb.get(pick.entry_id)
    if entry is None:
        return None
    return entry, objection(kb, message, entry, incidental=incidental)


def second_look_features(
    kb: KnowledgeBase, message: Message, nearest: Nearest
) -> tuple[KbEntry, tuple[float, ...]] | None:
    """The entry the second look found and the calibrated decision's features for it;
    None when it is gone since."""
    entry = kb.get(nearest.entry_id)
    if entry is None:
        return None
    return entry, second_features(nearest, findings(kb, message, entry))


def decide_first(
    kb: KnowledgeBase,
    message: Message,
    first: FirstLook | None,
    routing: Routing,
    calibration: Calibration,
    rules: Rules,
) -> Routing:
    """The first look's best answer, served when the calibrated estimate reaches the
    operating point and the answer is in the message's language.

    The guard reads the message only where its findings can change the outcome: they
    can only lower the estimate retrieval allows, so an answer declined without them
    gets that upper bound as its probability. The guard was a third of a first look's
    CPU, and most messages an overloaded server refuses are declined before it."""
    if first is None or first.hit is None:
        return replace(routing, intent="general", faq=None, reason="no knowledge-base answer")
    entry = first.hit.entry
    retrieval = first_retrieval(first.hit, first.lead)
    may_serve, p = calibration.first_may_serve(retrieval, FINDINGS_BOUNDS)
    one_question = not first_look_may_serve(kb.phrasings(entry))
    found: Findings | None = None
    if may_serve and not rules.follow_up and not one_question:
        found = findings(kb, message, entry)
        may_serve, p = calibration.first_serves((*retrieval, *found.features()))
    candidate = Candidate("faq", p, entry.id)
    candidates = (candidate, *(c for c in routing.candidates if c.intent != "faq"))
    if rules.follow_up:
        reason: str | None = "the message follows on from an earlier one"
    elif one_question:
        reason = "first look: the answer has one question, the second look judges it"
    elif found is None:
        reason = f"first look: p at most {p:.2f} < {calibration.point.first:.2f}"
    elif not may_serve:
        reason = f"first look: p {p:.2f} < {calibration.point.first:.2f}"
        if found.objection is not None:
            reason += f" ({found.objection})"
    elif language(entry.answer) != message.lang:
        reason = f"the answer is in {language(entry.answer)}, the message {message.lang}"
    else:
        return Routing("faq", p, first.lead, candidates, faq=first.hit, reason=None)
    return Routing("general", p, first.lead, candidates, reason=reason)


def decide_second(
    declined: Plan,
    entry: KbEntry,
    nearest: Nearest,
    features: tuple[float, ...],
    calibration: Calibration,
    *,
    kb_passages: int,
) -> Plan:
    """The second look's answer, served when the calibrated estimate says it is right
    with the promised precision, in the customer's language; otherwise its entry goes
    to the LLM as a passage (a question in another language than the entry's)."""
    serves, p = calibration.second_serves(features)
    reason = f"second look: e5 {nearest.similarity:.2f}, p {p:.2f}"
    if serves and language(entry.answer) == declined.lang:
        candidate = Candidate("faq", p, entry.id)
        routing = Routing("faq", p, nearest.margin, (candidate,), reason=reason)
        source = Source("kb", entry.id, entry.question)
        return replace(
            declined,
            routing=routing,
            tier="faq",
            reply=entry.answer,
            source=source,
            passages=(),
        )
    passages = declined.passages
    # The first look reads words, so it finds nothing across languages: the entry e5
    # found in another language goes to the LLM, which answers in the customer's.
    crossing = language(entry.answer) != declined.lang
    if crossing and entry.id not in {hit.entry.id for hit in passages}:
        passage = Hit(entry, nearest.similarity, 0.0, nearest.similarity)
        passages = (passage, *passages)[: max(kb_passages, 1)]
    return replace(declined, passages=passages)


def observe(
    kb: KnowledgeBase, look: SecondLook | None, probe: Probe, vector: Vectors | None
) -> Observation:
    """One probe of the background fit through both looks, judged on the same evidence
    as a customer's message."""

    def judged(message: str, entry: KbEntry) -> Findings:
        return findings(kb, message, entry)

    return probe_once(kb, look, probe, vector, judged, hits=ROUTER_HITS)
