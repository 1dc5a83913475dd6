"""The static embedder, Chinese words and the knowledge base's vocabulary."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from kefu.knowledge.base import KnowledgeBase, prepared
from kefu.knowledge.embedder import TABLE, StaticEmbedder
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.kb_words import entry_words, read_texts
from kefu.knowledge.vocabulary import Vocabulary, catalogue_products
from kefu.text.entities import salient
from kefu.text.words import words_of


def cosine(embedder: StaticEmbedder, a: str, b: str) -> float:
    first, second = embedder.embed_queries([a, b])
    return float(np.dot(first, second))


def test_words_of_cuts_chinese_into_dictionary_words() -> None:
    assert words_of("公司要采购50把椅子") == ["公司", "要", "采购", "50", "把", "椅子"]
    assert words_of("能寄PO Box吗？") == ["能", "寄", "po", "box", "吗"]
    assert words_of("I can\u2019t log in") == ["i", "can't", "log", "in"]
    assert "椅" in words_of("椅子", with_characters=True)


def test_vectors_are_unit_length_and_empty_text_is_zero(static_embedder: StaticEmbedder) -> None:
    vectors = static_embedder.embed_queries(["where is my parcel", "我的快递到哪了", "", "!!"])
    assert vectors.shape == (4, static_embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)
    assert not vectors[2:].any()


def test_paraphrases_are_nearer_than_other_topics(static_embedder: StaticEmbedder) -> None:
    question = "How long does delivery take?"
    assert cosine(static_embedder, question, "how many days until my parcel arrives") > cosine(
        static_embedder, question, "how do I reset my password"
    )
    # English and Chinese share the space.
    assert cosine(static_embedder, "refund", "退款") > cosine(static_embedder, "refund", "密码")


def test_an_unknown_chinese_word_falls_back_to_its_characters(
    static_embedder: StaticEmbedder,
) -> None:
    assert static_embedder.rows_of("流明家居")  # not a dictionary word; its characters are
    assert static_embedder.rows_of("qwzxv") == []  # an unknown Latin word adds nothing


def test_one_instance_serves_many_threads(static_embedder: StaticEmbedder) -> None:
    texts = ["where is my parcel", "退货政策是什么", "do you ship to japan"] * 20
    alone = static_embedder.embed_queries(texts)
    with ThreadPoolExecutor(4) as pool:
        rows = list(pool.map(lambda t: static_embedder.embed_queries([t])[0], texts))
    np.testing.assert_allclose(np.stack(rows), alone, atol=1e-6)


def test_vocabulary_knows_the_words_and_how_near_others_come(
    static_embedder: StaticEmbedder,
) -> None:
    texts = ["Do you offer discounts for large orders?", "退货政策是什么"]
    words = Vocabulary.of(texts, static_embedder)
    assert "discounts" in words
    assert "退货" in words
    assert "gym" not in words
    discount, gym, unknown = words.nearness_of(["discount", "gym", "qwzxv"])
    assert discount > gym
    assert unknown == 0.0
    assert Vocabulary.of([], static_embedder).nearness_of(["anything"]) == [0.0]


def test_an_answers_group_follows_changes(tmp_path: Path, static_embedder: StaticEmbedder) -> None:
    kb = KnowledgeBase.open(tmp_path / "knowledge.db", static_embedder)
    answer = "Delivery takes 2-4 business days."
    first = KbEntry.make("How long does delivery take?", answer)
    second = KbEntry.make("when will my DHL parcel come", answer)
    other = KbEntry.make("How do I reset my password?", "Use the Forgot password link.")
    kb.add([first, second, other])
    group = kb.answer(first)
    assert group.phrasings(first) == ["when will my DHL parcel come"]
    assert "parcel" in group.vocabulary
    assert "password" not in group.vocabulary
    assert "password" in kb.vocabulary
    # What the FAQ guard compares with: each question's entities, what they all name.
    assert group.questions(first) == [salient(first.question), salient(second.question)]
    assert "dhl" in group.coverage.names
    assert "business days" in group.coverage.text
    third = KbEntry.make("parcel arrival time?", answer)
    kb.add([third])
    phrasings = ["parcel arrival time?", "when will my DHL parcel come"]
    assert sorted(group.phrasings(first)) == phrasings
    assert "arrival" in group.vocabulary
    kb.remove([other.id])
    assert "password" not in kb.vocabulary
    # The same question with a new answer leaves the old answer's group.
    moved = KbEntry.make("when will my DHL parcel come", "Parcels come within a week.")
    kb.add([moved])
    assert group.phrasings(first) == ["parcel arrival time?"]
    assert "dhl" not in group.coverage.names  # what the group covered is not kept
    assert kb.answer(moved).phrasings(moved) == []
    assert "dhl" in kb.answer(moved).coverage.names
    assert "week" in kb.answer(moved).vocabulary
    assert "week" not in group.vocabulary


def test_texts_are_read_ahead_once(tmp_path: Path, static_embedder: StaticEmbedder) -> None:
    kb = KnowledgeBase.open(tmp_path / "knowledge.db", static_embedder)
    answer = "Delivery takes 2-4 business days."
    first = KbEntry.make("How long does delivery take?", answer)
    second = KbEntry.make("when will my DHL parcel come", answer)
    kb.add([first, second, KbEntry.make("Contact", "Mail us.", kind="passage")])
    assert kb.unread(1) == [first.question]
    texts = kb.unread(100)
    assert sorted(texts) == sorted([first.question, second.question, answer])  # no passage
    facts = read_texts(texts)
    kb.learn(facts)
    assert kb.unread(100) == []
    # What the guard reads is what was read ahead, not read again.
    assert kb.answer(first).questions(second)[0] is facts[second.question]
    third = KbEntry.make("parcel arrival time?", answer)
    kb.add([third])
    assert kb.unread(100) == [third.question]
    kb.answer(third).questions(third)  # a customer's message gets there first
    assert kb.unread(100) == []
    kb.close()


def test_catalogue_products_are_the_head_words_of_the_listed_items() -> None:
    text = "Bedroom: beds, memory foam mattresses and picture frames (oak or teak). Plus 2 rugs."
    assert catalogue_products(text) == ["beds", "mattresses", "frames", "oak", "teak", "rugs"]
    assert catalogue_products("卧室：床架、记忆棉床垫和衣柜；材质：柚木。") == [
        "床架",
        "床垫",
        "衣柜",
        "柚木",
    ]


def test_the_catalogue_follows_the_category_of_its_entries(
    tmp_path: Path, static_embedder: StaticEmbedder
) -> None:
    kb = KnowledgeBase.open(tmp_path / "knowledge.db", static_embedder)
    sells = KbEntry.make(
        "What do you sell?", "Sofas, rugs and wool blankets.", category="Catalogue"
    )
    returns = KbEntry.make("How do I return?", "Start a return in My Orders.", category="returns")
    kb.add([sells, returns])
    assert "blankets" in kb.catalogue
    assert "wool" not in kb.catalogue  # a modifier, not a product
    assert "return" not in kb.catalogue
    # The same question moved to another category leaves the catalogue...
    kb.add([dataclasses.replace(sells, category="about us")])
    assert "blankets" not in kb.catalogue
    # ...and a removed catalogue entry takes its products with it.
    kb.add([sells])
    assert "rugs" in kb.catalogue
    kb.remove([sells.id])
    assert len(kb.catalogue) == 0
    kb.close()


def test_words_kept_in_step_equal_a_fresh_build(
    tmp_path: Path, static_embedder: StaticEmbedder
) -> None:
    path = tmp_path / "knowledge.db"
    kb = KnowledgeBase.open(path, static_embedder)
    answer = "Delivery takes 2-4 business days."
    a = KbEntry.make("How long does delivery take?", answer)
    b = KbEntry.make("when will my parcel come", answer)
    c = KbEntry.make("How do I reset my password?", "Use the Forgot password link.")
    kb.add([a, b, c])
    kb.add([KbEntry.make("when will my parcel come", "Parcels come within a week.")])
    kb.remove([c.id])
    d = KbEntry.make("退货政策是什么？", "签收后30天内可以退货。")
    kb.add([d], ready=prepared(static_embedder, kb.needing_vectors([d])))
    fresh = KnowledgeBase.open(path, static_embedder)
    for entry in fresh.entries():
        group, reread = kb.answer(entry), fresh.answer(entry)
        assert sorted(group.phrasings(entry)) == sorted(reread.phrasings(entry))
        assert group.coverage == reread.coverage
        for word in entry_words(entry):
            assert word in kb.vocabulary
            assert word in group.vocabulary
        # no stale word left behind in the answer's group (the updated entry moved out)
        assert len(group.vocabulary) == len(reread.vocabulary)
    assert len(kb.vocabulary) == len(fresh.vocabulary)
    assert len(kb.catalogue) == len(fresh.catalogue)
    assert "password" not in kb.vocabulary
    kb.close()
    fresh.close()


def test_words_cut_ahead_are_used(tmp_path: Path, static_embedder: StaticEmbedder) -> None:
    kb = KnowledgeBase.open(tmp_path / "knowledge.db", static_embedder)
    entry = KbEntry.make("How long does delivery take?", "Two to four days.")
    ((key, (vector, cut)),) = prepared(static_embedder, [entry]).items()
    kb.add([entry], ready={key: (vector, [*cut, "precomputed"])})
    assert "precomputed" in kb.vocabulary  # not cut again on the knowledge-base thread
    kb.close()


def test_a_rebuilt_table_is_another_embedder(tmp_path: Path) -> None:
    # Stored KB vectors and cached answers are keyed by the name: a new table re-embeds.
    table = tmp_path / "words.npz"
    with np.load(TABLE) as data:
        fields = {key: data[key] for key in data.files}
    fields["vectors"] = fields["vectors"][:, ::-1].copy()
    np.savez_compressed(table, **fields)
    shipped, rebuilt = StaticEmbedder(), StaticEmbedder(table)
    assert shipped.name.startswith("e5-small-static-")
    assert rebuilt.name != shipped.name
    assert StaticEmbedder().name == shipped.name
