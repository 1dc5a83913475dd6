"""Sentence embeddings for dense retrieval and the semantic answer cache.

An embedder is a transport, like the engine: one blocking method per side
(queries, passages). The shipped one is a static word table distilled from
multilingual-e5-small (English and Chinese in one space):

A transformer pass of e5-small costs ~13 ms of one core per message here, and
20-60 ms while llama.cpp decodes on every core, which alone breaks a 20 ms
answer. As Model2Vec does, ``scripts/distill-embeddings`` embeds each word of a
vocabulary alone with the teacher, once; a message's vector is the SIF-weighted
mean of its words' rows (frequent words weigh little): tens of microseconds, a
thousand times less than the teacher. On the demo's paraphrases the hybrid search's
top-1 with it is within two points of the teacher's (``benchmarks/retrieval.py
--quality``), though its scores separate less (hence BM25's half share): customer
questions are matched on what their words mean more than on word order, and the
FAQ guard checks what word order decides (opposites, swapped objects).

A word the table lacks: a Chinese one falls back to its characters; a Latin one
is left out of the vector (BM25 still sees it, and the FAQ guard objects to it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kefu.text.message import Message
from kefu.text.words import is_cjk_word, load_segmenter, words_of

Vectors = npt.NDArray[np.float32]
TABLE = Path(__file__).parent / "static" / "words.npz"


class Embedder(Protocol):
    """Unit-length float32 vectors, so a dot product is the cosine similarity."""

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Shape (len(texts), dim): search queries and customer messages."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Shape (len(texts), dim): knowledge-base entries being indexed."""
        ...


class StaticEmbedder:
    """Vectors from the distilled word table; queries and passages alike. Read-only
    once loaded, so one instance serves every thread."""

    def __init__(self, table: Path = TABLE) -> None:
        with np.load(table) as data:
            raw_words = bytes(data["words"])
            words = raw_words.decode("utf-8").split("\n")
            # Stored vectors are keyed by the embedder's name: a rebuilt table is another
            # space, so its name carries a digest of the table.
            self._digest = hashlib.sha1(raw_words + data["vectors"].tobytes()).hexdigest()[:8]
            vectors = data["vectors"].astype(np.float32) * data["scales"][:, None]
            weights = data["weights"].astype(np.float32)
        self._rows = vectors * weights[:, None]  # weighted once, summed per message
        self._index = {word: i for i, word in enumerate(words)}
        self._dim = int(vectors.shape[1])
        load_segmenter()

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return f"e5-small-static-{self._digest}"

    def rows_of(self, text: str) -> list[int]:
        """The table rows a text's vector sums: its known words, and the characters of
        an unknown Chinese word."""
        return self._rows_of_words(words_of(text))

    def _rows_of_words(self, words: Sequence[str]) -> list[int]:
        rows: list[int] = []
        for word in words:
            row = self._index.get(word)
            if row is not None:
                rows.append(row)
            elif is_cjk_word(word):
                rows.extend(self._index[c] for c in word if c in self._index)
        return rows

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts)

    def embed_words(self, words: Sequence[str]) -> Vectors:
        """Shape (dim,): a text as ``embed_queries`` embeds it, from its ``words_of``."""
        out = np.zeros(self._dim, dtype=np.float32)
        self._fill(out, self._rows_of_words(words))
        return out

    def _embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            self._fill(out[i], self.rows_of(text))
        return out

    def _fill(self, out: Vectors, rows: list[int]) -> None:
        if rows:
            total = self._rows[rows].sum(axis=0)
            norm = float(np.linalg.norm(total))
            if norm > 0:
                out[:] = total / norm


def embed_message(embedder: Embedder, message: Message) -> Vectors:
    """Shape (dim,): a customer's message, from its words as they were read once where
    the embedder takes words (the static table), else from its folded text."""
    if isinstance(embedder, StaticEmbedder):
        return embedder.embed_words(message.words)
    return np.asarray(embedder.embed_queries([message.folded])[0], dtype=np.float32)
