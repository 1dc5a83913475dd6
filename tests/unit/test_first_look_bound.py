"""The first look reads the FAQ guard only where its findings can change the verdict:
the same verdicts as reading it for every message, on the demo's knowledge base and
the load generator's messages."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kefu.bench.pools import EN_FAQS, EN_UNIQUE, ZH_FAQS, ZH_UNIQUE
from kefu.faq import decide as faq
from kefu.faq.model import Curve, Model, Point
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import embed_message
from kefu.settings import Settings
from tests.unit.fast_path_support import opened

MESSAGES = [
    *EN_FAQS,
    *ZH_FAQS,
    *(text.format(n=1000 + i) for i, text in enumerate(EN_UNIQUE + ZH_UNIQUE)),
]


@pytest.mark.anyio
async def test_the_guard_is_read_only_where_it_can_change_the_verdict(
    settings_factory: Callable[..., Settings],
) -> None:
    fast_path = await opened(settings_factory(fast_path=True), second_look=False)
    target = fast_path.settings.faq_precision
    # A model that serves at 0.9, as labels might set it.
    fast_path.keeper.model = Model("", target, Point(0.9, "labels", 100, 100, 0.97), Curve(()))
    try:

        def verdicts(kb: KnowledgeBase) -> list[tuple[faq.Evidence, faq.Verdict, faq.Verdict]]:
            """Per message: the lazy evidence, its verdict, and the verdict with the guard read."""
            assert fast_path.embedder is not None
            out = []
            for text in MESSAGES:
                message = fast_path.read(text)
                vector = embed_message(fast_path.embedder, message)
                hits = kb.search(message, query_vector=vector, k=faq.HITS)
                lazy = faq.first(kb, message, hits, worth_reading=fast_path.worth_reading)
                full = faq.first(kb, message, hits)
                if full is None:
                    assert lazy is None
                    continue
                assert lazy is not None
                model = fast_path.keeper.model
                out.append((lazy, faq.decide(lazy, model, target), faq.decide(full, model, target)))
            return out

        judged = await fast_path.read_kb(verdicts)
    finally:
        await fast_path.close()
    assert any(v.serve for _, v, _ in judged)
    assert any(e.findings is None for e, _, _ in judged)  # declined without the guard
    for evidence, lazy, full in judged:
        assert lazy.serve == full.serve
        if evidence.findings is None:  # its probability is the most it could be
            assert lazy.probability >= full.probability
            assert lazy.probability < 0.9
        else:
            assert lazy.probability == full.probability
