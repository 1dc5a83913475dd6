"""Vocabularies: the words a knowledge base uses (``kb_words.KbWords`` keeps them in
step with its entries), and how near an unknown word comes to them.

The FAQ guard asks of every content word of a message: does the shop talk about
this, and does the chosen answer? A word the knowledge base uses is familiar; so is
a near synonym of one (quantity ~ large orders, 划痕 ~ 刮花), which is where the
static word vectors help: "gym", "router" or 电费 come near no word a furniture shop
uses. The word lists change per entry added or removed, never by cutting every entry
again: a change to a 10 000-entry knowledge base must not hold up the answers for
seconds. Only the nearness matrix is restacked, from the kept word vectors (about
1 ms per 2 000 words).
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

import numpy as np

from kefu.knowledge.embedder import Embedder, Vectors
from kefu.knowledge.entries import KbEntry
from kefu.text.words import words_of

# Entries in this category (any case) list what the shop sells: the products they name
# are details of a question about anything else for the FAQ guard, as a place or a
# number is ("can I send the throw blanket back?" asks the return policy).
CATALOGUE = "catalogue"
# A catalogue's sentences, a label before a colon ("Bedroom: beds, wardrobes"), and its
# items: split at commas, brackets and "and"; the last word of an item names the product.
_SENTENCE = re.compile(r"[.;!?\n。；！？]+")
_LABEL = re.compile(r"^[^:：]*[:：]")
_ITEM = re.compile(r"[,，、()（）]|\b(?:and|or|plus)\b|以及|及|和|与|或")
# Customers' words embedded lately, and the stacked rows of the answers' vocabularies
# used lately. The guard asks about the same words several times a message (its
# objection, then the calibrated decision's word counts), customers repeat words ("gym"
# in every near miss) and questions (the popular answers' rows), and each embedding or
# stacking costs the event loop up to a few hundred microseconds. Bounded: a customer's words
# and an answer's rows are not kept for good (thousands of answers, each a copy).
RECENT_WORDS = 4096
RECENT_ANSWERS = 256

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def is_catalogue(entry: KbEntry) -> bool:
    return (entry.category or "").casefold() == CATALOGUE


def catalogue_products(text: str) -> list[str]:
    """The products a catalogue text names: the head word of each listed item ("picture
    frames" -> frames, 记忆棉床垫 -> 床垫), so that "picture" or "office" in "office
    chairs" stay what they are elsewhere. A lone Chinese character is too vague to keep."""
    products: list[str] = []
    for sentence in _SENTENCE.split(text):
        for item in _ITEM.split(_LABEL.sub("", sentence.strip())):
            words = [w for w in words_of(item) if not w.isdigit()]
            if words and len(words[-1]) > 1:
                products.append(words[-1])
    return products


class Recent(Generic[K, V]):
    """The ``size`` most recently used items."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._size:
            self._items.popitem(last=False)

    def drop(self, key: K) -> None:
        self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)


class WordVectors:
    """Each knowledge-base word's vector, computed once and shared by the vocabularies;
    customers' recent words; the stacked rows of recently used answers' vocabularies.
    Like the vocabularies, used by one thread at a time (the knowledge base's lock)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._known: dict[str, Vectors] = {}
        self._recent: Recent[str, Vectors] = Recent(RECENT_WORDS)
        self.stacked: Recent[Vocabulary, Vectors] = Recent(RECENT_ANSWERS)

    def __call__(self, word: str, *, keep: bool = True) -> Vectors:
        vector = self._known.get(word)
        if vector is None:
            vector = self._recent.get(word)
            if vector is None:
                vector = self._embedder.embed_queries([word])[0]
            if keep:  # a knowledge-base word; a customer's words are kept a while only
                self._known[word] = vector
                self._recent.drop(word)
            else:
                self._recent.put(word, vector)
        return vector

    def forget(self, word: str) -> None:
        self._known.pop(word, None)


class Vocabulary:
    """A multiset of words (an entry adds its words once) and nearness to them."""

    def __init__(self, vectors: WordVectors, *, keep_rows: bool = True) -> None:
        self._vectors = vectors
        self._counts: Counter[str] = Counter()
        # The rows of the words present, built on use; kept for the knowledge base's
        # vocabulary, and for an answer's few dozen words while the answer is among the
        # recently used (``WordVectors.stacked``): thousands of answers would otherwise
        # each hold a copy.
        self._keep_rows = keep_rows
        self._matrix: Vectors | None = None

    @classmethod
    def of(cls, texts: Iterable[str], embedder: Embedder) -> Vocabulary:
        """A vocabulary of its own for some texts (each counts as one entry)."""
        vocabulary = cls(WordVectors(embedder))
        for text in texts:
            vocabulary.add(words_of(text))
        return vocabulary

    def add(self, words: Iterable[str]) -> None:
        for word in set(words):
            self._counts[word] += 1
            if self._counts[word] == 1:
                self._vectors(word)
                self._changed()

    def remove(self, words: Iterable[str]) -> None:
        for word in set(words):
            self._counts[word] -= 1
            if self._counts[word] <= 0:
                del self._counts[word]
                self._changed()

    def _changed(self) -> None:
        self._matrix = None
        self._vectors.stacked.drop(self)

    def __contains__(self, word: str) -> bool:
        return word in self._counts

    def __len__(self) -> int:
        return len(self._counts)

    def prepare(self) -> None:
        """Build the matrix now rather than in a customer's request."""
        self._rows()

    def nearness_of(self, words: Sequence[str]) -> list[float]:
        """For each word, the cosine between it and the nearest word here (0 for a word
        the embedder does not know, or an empty vocabulary), in one product for them all."""
        if not words:  # most calls: every word of the message is the knowledge base's own
            return []
        matrix = self._rows()
        if not len(matrix):
            return [0.0] * len(words)
        queries = np.stack([self._vectors(word, keep=False) for word in words])
        return [float(best) for best in np.max(queries @ matrix.T, axis=1)]

    def _rows(self) -> Vectors:
        matrix = self._matrix if self._keep_rows else self._vectors.stacked.get(self)
        if matrix is not None:
            return matrix
        rows = [self._vectors(word) for word in self._counts]
        matrix = np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32)
        matrix = np.asarray(matrix[np.linalg.norm(matrix, axis=1) > 0], dtype=np.float32)
        if self._keep_rows:
            self._matrix = matrix
        else:
            self._vectors.stacked.put(self, matrix)
        return matrix
