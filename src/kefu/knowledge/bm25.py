"""BM25 over an inverted index that grows and shrinks one document at a time.

Documents live in rows (the knowledge base's row numbers, shared with the dense
matrix). Each term's postings are two growable numpy arrays (rows, term
frequencies), so scoring a query is a few vectorised gathers per query term, not
a Python loop over postings. A removed row's postings stay until the owner
compacts (its score is masked by the caller), but its document frequency and
length leave the statistics at once, so IDF is exact after every change.

Latin words are indexed by their Snowball (Porter 2) stem, so "returning" finds
"returns" and "cracked" finds "crack": customers inflect freely, and an FAQ's wording
is one choice among many. Chinese has no inflection; its characters and bigrams stay.

Normalisation to [0, 1], comparable across queries: the score is divided by the
score the query would earn against an ideal document that holds every query
term with a question's term frequency at average length, i.e. "how much of the
query's IDF mass this document matches". Repeated query terms count once.

A term's contribution to each row it occurs in depends on the statistics only, so
it is computed once and kept until a document comes or goes: scoring a query is
then one scatter-add per term (customers' messages repeat their words).
"""

from __future__ import annotations

import functools
import math
import threading
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import snowballstemmer

from kefu.text.message import Message
from kefu.text.words import is_cjk_word, tokens

K1 = 1.2
B = 0.75
# The question is indexed this many times: customers ask questions, so a word of
# the question is stronger evidence than the same word deep in the answer.
QUESTION_WEIGHT = 2

Floats = npt.NDArray[np.float32]
Rows = npt.NDArray[np.int64]

# What a query term adds to a document that holds it as often as a question holds its
# words, at average length: the ideal document's share of each term's IDF.
IDEAL_TF = (QUESTION_WEIGHT * (K1 + 1)) / (QUESTION_WEIGHT + K1)
# Terms whose contributions are kept; past it they are dropped (customers' typos and
# ids need not stay).
MAX_KEPT_TERMS = 65536
_NOWHERE: tuple[Rows, Floats] = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))


_ENGLISH = snowballstemmer.stemmer("english")
_ENGLISH_LOCK = threading.Lock()  # a Snowball stemmer keeps its word in itself


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    with _ENGLISH_LOCK:
        return str(_ENGLISH.stemWord(word))


def terms_of(text: str | Message) -> list[str]:
    """BM25 terms: ``tokens``, with Latin words stemmed (numbers and ids stay whole)."""
    return [
        token if is_cjk_word(token) or not token.replace("'", "").isalpha() else _stem(token)
        for token in (text.tokens if isinstance(text, Message) else tokens(text))
    ]


def entry_terms(question: str, answer: str) -> Counter[str]:
    """Term frequencies of an entry, its question counted QUESTION_WEIGHT times."""
    terms = Counter(terms_of(answer))
    for term in terms_of(question):
        terms[term] += QUESTION_WEIGHT
    return terms


class _Postings:
    __slots__ = ("rows", "size", "tfs")

    def __init__(self) -> None:
        self.rows = np.empty(4, dtype=np.int64)
        self.tfs = np.empty(4, dtype=np.float32)
        self.size = 0

    def append(self, row: int, tf: float) -> None:
        if self.size == len(self.rows):
            self.rows = np.concatenate([self.rows, np.empty_like(self.rows)])
            self.tfs = np.concatenate([self.tfs, np.empty_like(self.tfs)])
        self.rows[self.size] = row
        self.tfs[self.size] = tf
        self.size += 1


class Bm25Index:
    """Not thread-safe; the knowledge base serialises access."""

    def __init__(self) -> None:
        self._postings: dict[str, _Postings] = {}
        self._df: Counter[str] = Counter()
        self._lengths = np.zeros(16, dtype=np.float32)
        self._docs = 0
        self._total_length = 0.0
        # term -> (IDF, the rows holding it, its contribution to each): see the docstring.
        self._kept: dict[str, tuple[float, Rows, Floats]] = {}

    @property
    def documents(self) -> int:
        return self._docs

    def add(self, row: int, terms: Counter[str]) -> None:
        """Index a document at ``row`` (a row never used before, or compacted away)."""
        if row >= len(self._lengths):
            grown = np.zeros(max(row + 1, 2 * len(self._lengths)), dtype=np.float32)
            grown[: len(self._lengths)] = self._lengths
            self._lengths = grown
        self._kept.clear()
        length = float(sum(terms.values()))
        self._lengths[row] = length
        self._docs += 1
        self._total_length += length
        for term, tf in terms.items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = _Postings()
            postings.append(row, tf)
            self._df[term] += 1

    def remove(self, row: int, terms: Counter[str]) -> None:
        """Take a document out of the statistics; its postings are masked until compaction."""
        self._kept.clear()
        self._docs -= 1
        self._total_length -= float(self._lengths[row])
        self._lengths[row] = 0
        for term in terms:
            self._df[term] -= 1
            if self._df[term] <= 0:
                del self._df[term]
                del self._postings[term]

    def idf(self, term: str) -> float:
        """Lucene's BM25 IDF: always positive, highest for a term no document has."""
        df = self._df.get(term, 0)
        return math.log(1 + (self._docs - df + 0.5) / (df + 0.5))

    def scores(self, query_terms: Sequence[str], rows: int) -> Floats:
        """Normalised scores in [0, 1] for rows 0..rows-1 (dead rows get garbage: mask them)."""
        out = np.zeros(rows, dtype=np.float32)
        if self._docs == 0:
            return out
        ideal = 0.0
        for term in dict.fromkeys(query_terms):
            idf, at, contribution = self._contribution(term)
            ideal += idf * IDEAL_TF
            out[at] += contribution
        if ideal > 0:
            out /= np.float32(ideal)
        np.minimum(out, 1.0, out=out)
        return out

    def _contribution(self, term: str) -> tuple[float, Rows, Floats]:
        kept = self._kept.get(term)
        if kept is not None:
            return kept
        if len(self._kept) >= MAX_KEPT_TERMS:
            self._kept.clear()
        idf = self.idf(term)
        at, contribution = _NOWHERE
        postings = self._postings.get(term)
        if postings is not None:
            at = postings.rows[: postings.size].copy()
            tf = postings.tfs[: postings.size]
            norm = K1 * (1 - B + B * self._lengths[at] / (self._total_length / self._docs))
            contribution = (idf * tf * (K1 + 1) / (tf + norm)).astype(np.float32, copy=False)
        self._kept[term] = kept = (idf, at, contribution)
        return kept
