"""KnowledgeBase: upsert, remove, persistence, refresh across processes, and retrieval."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from kefu import demo
from kefu.errors import NotFound
from kefu.knowledge import index as index_module
from kefu.knowledge.base import KbChange, KnowledgeBase
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.importers import KbImportError, parse_bytes

from .conftest import CountingEmbedder, HashEmbedder, shop_entries


def test_add_search_english_and_chinese(kb: KnowledgeBase) -> None:
    change = kb.add(shop_entries())
    assert len(change.added) == len(kb) == 7
    assert not change.updated
    assert not change.removed
    [top] = kb.search("when will my parcel arrive", k=1)
    assert top.entry.question == "How long does delivery take?"
    assert 0 <= top.lexical <= 1
    assert 0 <= top.score <= 1
    assert 0.5 < top.dense <= 1
    [top] = kb.search("我想退货", k=1)
    assert top.entry.question == "怎么申请退货？"
    hits = kb.search("I forgot my password", k=3)
    assert hits[0].entry.question == "How do I reset my password?"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_exact_question_scores_higher_than_paraphrase(kb: KnowledgeBase) -> None:
    kb.add(shop_entries())
    exact = kb.search("How much does shipping cost?", k=1)[0]
    loose = kb.search("is postage free", k=1)[0]
    assert exact.entry.question == loose.entry.question == "How much does shipping cost?"
    assert exact.score > loose.score
    assert exact.lexical > 0.9


def test_query_vector_and_kind_filter(kb: KnowledgeBase, embedder: CountingEmbedder) -> None:
    passage = KbEntry.make("Store hours", "Open 9 to 5 every day.", kind="passage")
    kb.add([*shop_entries(), passage])
    vector = embedder.embed_queries(["what are your store hours"])[0]
    assert kb.search("what are your store hours", query_vector=vector, k=1)[0].entry == passage
    assert kb.search("what are your store hours", k=1, kind="faq")[0].entry.kind == "faq"
    assert [h.entry for h in kb.search("x", k=5, kind="passage")] == [passage]


def test_upsert_updates_same_question_and_skips_unchanged(
    kb: KnowledgeBase, embedder: CountingEmbedder
) -> None:
    kb.add(shop_entries())
    assert not kb.add(shop_entries())  # the same file again changes nothing
    new = KbEntry.make("how long does delivery take", "One to two days now.", source="b.csv")
    change = kb.add([new])
    assert change.updated == [new]
    assert not change.added
    assert kb.get(new.id) == new
    assert len(kb) == 7
    [top] = kb.search("delivery time", k=1)
    assert top.entry.answer == "One to two days now."
    before = embedder.passages
    kb.add([dataclasses.replace(new, category="fast")])  # category only: no embedding
    assert embedder.passages == before


def test_an_answers_phrasings_are_counted_leaving_a_probes_own_out(kb: KnowledgeBase) -> None:
    answer = "Return it within 30 days from My Orders."
    first = KbEntry.make("How do I return an item?", answer)
    second = KbEntry.make("can i send it back", answer)
    alone = KbEntry.make("Do you ship to Japan?", "Yes, in 7-14 days.")
    kb.add([first, second, alone])
    assert kb.phrasings(first) == kb.phrasings(second) == 2
    assert kb.phrasings(first, frozenset({second.id})) == 1  # a held-out probe's view
    assert kb.phrasings(alone) == 1


def test_remove(kb: KnowledgeBase) -> None:
    kb.add(shop_entries())
    victim = kb.entries(category="returns")[0]
    change = kb.remove([victim.id, victim.id])
    assert change.removed == [victim]
    assert len(kb) == 6
    assert kb.get(victim.id) is None
    assert all(h.entry != victim for h in kb.search("how do I return an item", k=6))
    with pytest.raises(NotFound):
        kb.remove([shop_entries()[0].id, "000000000000"])
    assert len(kb) == 6  # nothing removed when one id is unknown


def test_failing_import_leaves_the_kb_unchanged(kb: KnowledgeBase, tmp_path: Path) -> None:
    kb.add(shop_entries())
    before = kb.entries()
    bad = b"question,answer\nNew question?,New answer\nAnother?,\n"
    with pytest.raises(KbImportError, match="line 3: empty answer"):
        kb.add(parse_bytes(bad, "bad.csv"))
    assert kb.entries() == before


def test_incremental_index_equals_a_fresh_rebuild(
    tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "COMPACT_MIN_DEAD", 1)  # compaction runs too
    entries = shop_entries()
    grown = KnowledgeBase.open(tmp_path / "a.db", embedder)
    for entry in entries:
        grown.add([entry])
    grown.add([dataclasses.replace(entries[0], answer="Now 1-2 business days.")])
    grown.remove([entries[3].id])
    extra = KbEntry.make("Do you ship to Japan?", "Yes, in 7-14 days.")
    grown.add([extra])
    fresh = KnowledgeBase.open(tmp_path / "b.db", embedder)
    fresh.add(grown.entries())
    for query in ("delivery time", "my password", "退货", "ship to Tokyo", "运费"):
        a, b = grown.search(query, k=4), fresh.search(query, k=4)
        assert [h.entry.id for h in a] == [h.entry.id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-5)
    grown.close()
    fresh.close()


def test_reopen_loads_vectors_without_embedding(tmp_path: Path, embedder: CountingEmbedder) -> None:
    path = tmp_path / "knowledge.db"
    first = KnowledgeBase.open(path, embedder)
    first.add(shop_entries())
    expected = first.search("when will my parcel arrive", k=3)
    first.close()
    again = CountingEmbedder(embedder.inner)
    second = KnowledgeBase.open(path, again)
    assert len(second) == 7
    assert again.passages == 0
    assert second.search("when will my parcel arrive", k=3) == expected
    second.close()


def test_reopen_with_another_embedder_embeds_again(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    path = tmp_path / "knowledge.db"
    first = KnowledgeBase.open(path, embedder)
    first.add(shop_entries())
    first.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE kb_meta SET value = 'old-model' WHERE key = 'vectors'")
    conn.commit()
    conn.close()
    again = CountingEmbedder(embedder.inner)
    kb = KnowledgeBase.open(path, again)
    assert again.passages == 2 * 7  # the whole entry and the question, each entry
    assert (
        kb.search("when will my parcel arrive", k=1)[0].entry.question
        == "How long does delivery take?"
    )
    kb.close()


def test_refresh_sees_another_process(tmp_path: Path, embedder: CountingEmbedder) -> None:
    path = tmp_path / "knowledge.db"
    server = KnowledgeBase.open(path, embedder)
    server.add(shop_entries()[:3])
    assert not server.refresh()
    cli = KnowledgeBase.open(path, embedder)
    changed = dataclasses.replace(shop_entries()[0], answer="Next day.")
    cli.add([changed, shop_entries()[4]])
    cli.remove([shop_entries()[2].id])
    cli.close()
    change = server.refresh()
    assert [e.id for e in change.added] == [shop_entries()[4].id]

    assert [e.answer for e in change.updated] == ["Next day."]
    assert [e.id for e in change.removed] == [shop_entries()[2].id]
    assert len(server) == 3
    assert not server.refresh()
    assert server.search("下单多久到货", k=1)[0].entry.id == shop_entries()[4].id
    server.close()


def test_add_reports_pending_changes_of_another_process(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    path = tmp_path / "knowledge.db"
    server = KnowledgeBase.open(path, embedder)
    cli = KnowledgeBase.open(path, embedder)
    cli.add(shop_entries()[:1])
    change = server.add(shop_entries()[1:2])
    assert {e.id for e in change.added} == {e.id for e in shop_entries()[:2]}
    cli.close()
    server.close()


def test_load_demo(tmp_path: Path) -> None:
    kb = KnowledgeBase.open(tmp_path / "knowledge.db", HashEmbedder())  # 80 real ones: 6 s
    change = kb.add(demo.entries())
    assert len(change.added) == len(kb) > 40
    assert {e.source for e in kb.entries()} == {"demo"}
    assert {e.lang for e in kb.entries()} == {"en", "zh"}
    assert kb.search("How long does delivery take?", k=1)[0].entry.lang == "en"
    assert kb.search("下单后多久能收到货？", k=1)[0].entry.lang == "zh"
    assert not kb.add(demo.entries())
    kb.close()


def test_change_helpers() -> None:
    a, b = shop_entries()[:2]
    change = KbChange([a], [], [b])
    assert change
    assert change.touched == [a, b]
    assert not KbChange()
    assert (change + KbChange(updated=[a])).updated == [a]


def test_empty_kb_search(kb: KnowledgeBase) -> None:
    assert kb.search("anything") == []
    assert kb.entries() == []
