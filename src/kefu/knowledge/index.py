"""The in-memory hybrid index: entries in rows, BM25 and dense scores fused per row.

Rows are append-only: an updated entry moves to a new row and its old row is
marked dead (masked at search time), so an add never rebuilds anything. When
dead rows pass a quarter of all rows the index compacts itself (an O(n)
rebuild from what it holds, without embedding anything again).

Fusion: score = W_DENSE * dense' + (1 - W_DENSE) * lexical, where dense' is the
cosine rescaled to [0, 1] between DENSE_FLOOR and DENSE_CEIL (dense.py) and
lexical the normalised BM25 score (bm25.py); both lie in [0, 1], so does score,
and neither is scaled by the query's best hit, so a threshold means the same for
every query. The weight was chosen on the dev split of
benchmarks/data/answer_quality.csv, by what the router then serves (answered,
false hits and routing at each weight's best thresholds): with the static word
table, whose vectors lose word order and context, lexical evidence counts as much
as dense (0.5: EN/ZH answered 95/95 %, false hits 0.9/0.4 %; 0.9: 94/90 %,
1.7/2.2 %; measured before BM25 stemmed English). With the transformer it replaced,
0.9 had been best.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from kefu.knowledge.bm25 import Bm25Index, entry_terms
from kefu.knowledge.dense import DenseMatrix, rescale
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry

W_DENSE = 0.5
COMPACT_MIN_DEAD = 64


class Hit(NamedTuple):  # not a dataclass: a search makes dozens, and a tuple is made fastest
    entry: KbEntry
    score: float  # fused, in [0, 1], comparable across queries (the router thresholds it)
    lexical: float  # BM25 normalised to [0, 1] (see bm25.py)
    dense: float  # raw cosine similarity with the query


class HybridIndex:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._reset()

    def _reset(self) -> None:
        self._bm25 = Bm25Index()
        self._dense = DenseMatrix(self.dim)
        self._rows: list[KbEntry | None] = []  # None: a dead row
        self._terms: list[Counter[str]] = []
        self._row_of: dict[str, int] = {}
        self._alive = np.zeros(16, dtype=bool)
        self._faq = np.zeros(16, dtype=bool)

    def __len__(self) -> int:
        return len(self._row_of)

    def __iter__(self) -> Iterator[KbEntry]:
        return (entry for entry in self._rows if entry is not None)

    def get(self, entry_id: str) -> KbEntry | None:
        row = self._row_of.get(entry_id)
        return None if row is None else self._rows[row]

    def vector(self, entry_id: str) -> Vectors:
        return self._dense.vector(self._row_of[entry_id])

    def upsert(self, entries: Sequence[KbEntry], vectors: Vectors) -> None:
        """Add or replace entries (by id) with their unit vectors, one row each."""
        if len(entries) != len(vectors):
            raise ValueError("one vector per entry")
        self._drop([entry.id for entry in entries if entry.id in self._row_of])
        first = self._dense.append(vectors)
        self._grow(first + len(entries))
        for offset, entry in enumerate(entries):
            row = first + offset
            terms = entry_terms(entry.question, entry.answer)
            self._rows.append(entry)
            self._terms.append(terms)
            self._row_of[entry.id] = row
            self._alive[row] = True
            self._faq[row] = entry.kind == "faq"
            self._bm25.add(row, terms)
        self._maybe_compact()

    def remove(self, ids: Sequence[str]) -> None:
        self._drop(ids)
        self._maybe_compact()

    def _drop(self, ids: Sequence[str]) -> None:
        for entry_id in ids:
            row = self._row_of.pop(entry_id)
            self._bm25.remove(row, self._terms[row])
            self._rows[row] = None
            self._terms[row] = Counter()
            self._alive[row] = False

    def _grow(self, rows: int) -> None:
        if rows > len(self._alive):
            size = max(rows, 2 * len(self._alive))
            self._alive = np.concatenate([self._alive, np.zeros(size - len(self._alive), bool)])
            self._faq = np.concatenate([self._faq, np.zeros(size - len(self._faq), bool)])

    def _maybe_compact(self) -> None:
        dead = len(self._rows) - len(self._row_of)
        if dead >= COMPACT_MIN_DEAD and dead * 4 > len(self._rows):
            self.compact()

    def compact(self) -> None:
        """Rebuild without the dead rows (keeps every entry and vector; no embedding)."""
        live = [(entry, self._dense.vector(row)) for row, entry in enumerate(self._rows) if entry]
        self._reset()
        if live:
            self.upsert([entry for entry, _ in live], np.stack([vector for _, vector in live]))

    def search(
        self, query_terms: Sequence[str], query_vector: Vectors, *, k: int, kind: str | None
    ) -> list[Hit]:
        rows = len(self._rows)
        if not self._row_of or k <= 0:
            return []
        lexical = self._bm25.scores(query_terms, rows)
        cosines = self._dense.cosines(query_vector)
        fused = np.float32(W_DENSE) * rescale(cosines.copy())
        fused += np.float32(1 - W_DENSE) * lexical
        mask = self._alive[:rows]
        if kind == "faq":
            mask = mask & self._faq[:rows]
        elif kind == "passage":
            mask = mask & ~self._faq[:rows]
        elif kind is not None:
            raise ValueError(f"unknown kind {kind!r}")
        k = min(k, int(mask.sum()))
        if k == 0:
            return []
        # Rank by the fused score; ties (both parts clipped to 0) by the raw cosine.
        key = np.where(mask, fused + np.float32(1e-4) * cosines, np.float32(-2.0))
        top = np.argpartition(-key, k - 1)[:k] if k < rows else np.arange(rows)
        top = top[np.argsort(-key[top], kind="stable")][:k]
        hits = []
        # Python floats in one step each: the router asks for dozens of hits per message.
        scores = zip(fused[top].tolist(), lexical[top].tolist(), cosines[top].tolist(), strict=True)
        for row, (score, lexical_score, cosine) in zip(top.tolist(), scores, strict=True):
            entry = self._rows[row]
            assert entry is not None
            hits.append(Hit(entry, score, lexical_score, cosine))
        return hits
