"""One scope's question vectors as a growable matrix, so a lookup is one matvec."""

from __future__ import annotations

import numpy as np

from kefu.knowledge.embedder import Vectors


def unit_row(vector: Vectors) -> Vectors:
    """A (dim,) float32 unit vector from a (dim,) or (1, dim) array."""
    row = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(row))
    if not row.size or not np.isfinite(norm) or norm == 0.0:
        raise ValueError("a cache vector must be a non-zero, finite embedding")
    return row / np.float32(norm)


class Rows:
    """Entry ids and their unit vectors; removal moves the last row into the hole."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._matrix: Vectors = np.empty((16, dim), dtype=np.float32)
        self.ids: list[str] = []
        self._row: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def matrix(self) -> Vectors:
        return self._matrix[: len(self.ids)]

    def add(self, entry_id: str, vector: Vectors) -> None:
        if vector.shape != (self.dim,):
            raise ValueError(f"vector has shape {vector.shape}, the cache holds ({self.dim},)")
        n = len(self.ids)
        if n == len(self._matrix):
            grown = np.empty((2 * n, self.dim), dtype=np.float32)
            grown[:n] = self._matrix
            self._matrix = grown
        self._matrix[n] = vector
        self._row[entry_id] = n
        self.ids.append(entry_id)

    def remove(self, entry_id: str) -> None:
        row = self._row.pop(entry_id)
        last = len(self.ids) - 1
        if row != last:
            moved = self.ids[last]
            self._matrix[row] = self._matrix[last]
            self.ids[row] = moved
            self._row[moved] = row
        self.ids.pop()

    def nearest(self, vector: Vectors, k: int) -> list[tuple[str, float]]:
        """Up to k (id, cosine distance) pairs, nearest first."""
        if vector.shape != (self.dim,):
            raise ValueError(f"vector has shape {vector.shape}, the cache holds ({self.dim},)")
        similarity = self.matrix @ vector
        k = min(k, len(similarity))
        if k == 0:
            return []
        top = np.argpartition(-similarity, k - 1)[:k] if k < len(similarity) else np.arange(k)
        top = top[np.argsort(-similarity[top], kind="stable")]
        return [(self.ids[i], max(0.0, 1.0 - float(similarity[i]))) for i in top]

    def within(self, near: Vectors, distance: float) -> list[str]:
        """Ids whose vector is within ``distance`` of any row of ``near`` (m, dim)."""
        if not len(self.ids) or not len(near):
            return []
        closest = (self.matrix @ near.T).max(axis=1)
        return [self.ids[i] for i in np.flatnonzero(closest >= 1.0 - distance)]
