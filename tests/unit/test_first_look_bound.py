"""The first look reads the FAQ guard only where its findings can change the outcome:
the same decisions as reading it for every message, on the demo's knowledge base and
the load generator's messages."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kefu.bench.pools import EN_FAQS, EN_UNIQUE, ZH_FAQS, ZH_UNIQUE
from kefu.calibration.features import (
    Findings,
    first_features,
    first_look,
    first_look_may_serve,
)
from kefu.fastpath.router import read_rules, route
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import embed_message
from kefu.knowledge.entries import KbEntry
from kefu.service import decision
from kefu.settings import Settings
from kefu.text.message import Message
from tests.unit.fast_path_support import opened

MESSAGES = [
    *EN_FAQS,
    *ZH_FAQS,
    *(text.format(n=1000 + i) for i, text in enumerate(EN_UNIQUE + ZH_UNIQUE)),
]


@pytest.mark.anyio
async def test_the_guard_is_read_only_where_it_can_change_the_decision(
    settings_factory: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_path = await opened(settings_factory(fast_path=True), second_look=False)
    try:
        calibration = fast_path.keeper.calibration
        assert calibration is not None  # the demo's, shipped
        guard_reads: list[str] = []
        read_findings = decision.findings

        def counted(kb: KnowledgeBase, message: str | Message, entry: KbEntry) -> Findings:
            guard_reads.append(str(message))
            return read_findings(kb, message, entry)

        def judge(kb: KnowledgeBase) -> list[tuple[bool, float, bool, float, bool]]:
            """Per message: served, its probability, guard read, the probability with the
            guard read, and whether the first look declines it whatever the guard says."""
            assert fast_path.embedder is not None
            judged = []
            for text in MESSAGES:
                message = fast_path.read(text)
                rules = read_rules(message, failures=0, config=fast_path.router)
                hits = kb.search(
                    message, query_vector=embed_message(fast_path.embedder, message), k=64
                )
                first = first_look(hits)
                if first is None or first.hit is None:
                    continue
                routing = route(message, hits, config=fast_path.router, rules=rules)
                before = len(guard_reads)
                decided = decision.decide_first(kb, message, first, routing, calibration, rules)
                read = len(guard_reads) > before
                # The reference: the guard read for every message, as before.
                found = read_findings(kb, message, first.hit.entry)
                _, p = calibration.first_serves(first_features(first.hit, first.lead, found))
                declined_anyway = rules.follow_up or not first_look_may_serve(
                    kb.phrasings(first.hit.entry)
                )
                judged.append(
                    (decided.intent == "faq", decided.confidence, read, p, declined_anyway)
                )
            return judged

        monkeypatch.setattr(decision, "findings", counted)
        judged = await fast_path.read_kb(judge)
    finally:
        await fast_path.close()
    threshold = calibration.point.first
    served = [j for j in judged if j[0]]
    skipped = [j for j in judged if not j[2]]
    # Both kinds among these messages.
    assert served
    assert skipped
    for is_served, p, read, reference, declined_anyway in judged:
        if read:
            assert p == reference
        else:  # declined without the guard: its probability is the most it could be
            assert not is_served
            assert p >= reference
            assert p < threshold or declined_anyway
        if is_served:
            assert reference >= threshold
        if reference >= threshold and not declined_anyway:
            assert read  # an answer the guard might let through is always read
