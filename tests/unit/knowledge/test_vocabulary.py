"""What the vocabularies keep between requests: customers' recent words, the stacked rows of
recently used answers; neither may change a nearness."""

from __future__ import annotations

import numpy as np

from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.vocabulary import Recent, Vocabulary, WordVectors


def test_recent_keeps_the_most_recently_used() -> None:
    recent: Recent[str, int] = Recent(2)
    recent.put("a", 1)
    recent.put("b", 2)
    assert recent.get("a") == 1  # "b" is now the least recent
    recent.put("c", 3)
    assert recent.get("b") is None
    assert (recent.get("a"), recent.get("c")) == (1, 3)
    recent.drop("a")
    assert recent.get("a") is None
    assert len(recent) == 1


def test_a_customers_word_is_embedded_once_and_equals_a_fresh_embedding(
    static_embedder: StaticEmbedder,
) -> None:
    vectors = WordVectors(static_embedder)
    first = vectors("gymnasium", keep=False)
    assert vectors("gymnasium", keep=False) is first
    np.testing.assert_array_equal(first, static_embedder.embed_queries(["gymnasium"])[0])
    # A word the knowledge base takes up later is kept for good, with the same vector.
    np.testing.assert_array_equal(vectors("gymnasium"), first)


def answer_words(static_embedder: StaticEmbedder) -> tuple[WordVectors, Vocabulary]:
    vectors = WordVectors(static_embedder)
    answer = Vocabulary(vectors, keep_rows=False)  # as an answer's group holds its words
    answer.add(["delivery", "parcel", "days"])
    return vectors, answer


def test_an_answers_rows_are_stacked_once_and_restacked_after_a_change(
    static_embedder: StaticEmbedder,
) -> None:
    vectors, answer = answer_words(static_embedder)
    fresh = Vocabulary.of(["delivery parcel days"], static_embedder)
    asked = ["shipping", "refund", "gym"]
    before = answer.nearness_of(asked)
    assert before == fresh.nearness_of(asked)
    assert len(vectors.stacked) == 1
    assert answer.nearness_of(asked) == before  # from the kept rows

    answer.add(["refund"])
    assert len(vectors.stacked) == 0  # the change let its rows go
    after = answer.nearness_of(asked)
    assert after[1] > before[1]
    assert after[1] > 0.99  # "refund" is one of its words now
    answer.remove(["refund"])
    assert answer.nearness_of(asked) == before


def test_only_the_most_recent_answers_rows_are_kept(static_embedder: StaticEmbedder) -> None:
    vectors = WordVectors(static_embedder)
    vectors.stacked = Recent(2)
    answers = [Vocabulary(vectors, keep_rows=False) for _ in range(3)]
    for answer, word in zip(answers, ["delivery", "refund", "password"], strict=True):
        answer.add([word])
    nearness = [answer.nearness_of(["parcel"]) for answer in answers]
    assert len(vectors.stacked) == 2
    # The first answer's rows were let go; stacked again, they give the same nearness.
    assert answers[0].nearness_of(["parcel"]) == nearness[0]
