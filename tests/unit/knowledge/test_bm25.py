"""BM25 terms and scores: stems for English, characters and bigrams for Chinese."""

from __future__ import annotations

from kefu.knowledge.bm25 import Bm25Index, entry_terms, terms_of


def test_english_words_are_stemmed_numbers_and_chinese_are_not() -> None:
    assert terms_of("Returning 2 cracked lamps") == ["return", "2", "crack", "lamp"]
    assert terms_of("the order's status") == ["the", "order", "status"]
    assert terms_of("LH-100234") == ["lh", "100234"]
    assert terms_of("退货") == ["退", "货", "退货"]


def test_an_inflected_query_matches_the_entry_in_full() -> None:
    index = Bm25Index()
    index.add(0, entry_terms("How do I return an item?", "Start a return in My Orders."))
    index.add(1, entry_terms("How long does delivery take?", "Two to four days."))
    scores = index.scores(terms_of("returning items"), rows=2)
    assert scores[0] == 1.0  # every term of the query, at the weight of a question
    assert scores[1] == 0.0


DOCUMENTS = [
    ("How do I return an item?", "Start a return in My Orders."),
    ("How long does delivery take?", "Two to four days; express delivery takes one."),
    ("退货要多久？", "退货在收到后五天内退款。"),
]


def built(documents: list[tuple[str, str]]) -> Bm25Index:
    index = Bm25Index()
    for row, (question, answer) in enumerate(documents):
        index.add(row, entry_terms(question, answer))
    return index


def test_scores_kept_from_earlier_queries_follow_every_change() -> None:
    query = terms_of("how long does a return take 退货")
    index = built(DOCUMENTS[:2])
    before = index.scores(query, rows=3)  # keeps what each term adds
    assert list(index.scores(query, rows=3)) == list(before)
    index.add(2, entry_terms(*DOCUMENTS[2]))
    assert list(index.scores(query, rows=3)) == list(built(DOCUMENTS).scores(query, rows=3))
    index.remove(2, entry_terms(*DOCUMENTS[2]))
    assert list(index.scores(query, rows=2)) == list(before[:2])
