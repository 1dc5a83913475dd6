"""Dense side of retrieval: unit vectors in one growable float32 matrix, scored by one matvec.

10 000 x 384 float32 is 15 MB and one matrix-vector product over it takes about
a millisecond, so an exact scan beats any approximate index at this size (no
recall loss, no build step, trivially incremental). Rows are appended; a
removed row is masked by the owner until it compacts.

The static embedder's cosines between unrelated texts still sit around 0.6-0.8,
so the raw cosine is rescaled to [0, 1] between DENSE_FLOOR and DENSE_CEIL
before fusion.
"""

from __future__ import annotations

import numpy as np

from kefu.knowledge.embedder import Vectors

# From the demo and the dev split of benchmarks/data/answer_quality.csv: a message and
# the nearest unrelated entry score about 0.6-0.87, a paraphrase and its entry 0.8-0.95.
DENSE_FLOOR = 0.70
DENSE_CEIL = 0.95


def rescale(cosines: Vectors) -> Vectors:
    """Cosine -> [0, 1]: 0 at or below DENSE_FLOOR, 1 at or above DENSE_CEIL, linear between."""
    out = (cosines - np.float32(DENSE_FLOOR)) / np.float32(DENSE_CEIL - DENSE_FLOOR)
    return np.clip(out, 0.0, 1.0, out=out)


class DenseMatrix:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._matrix = np.zeros((16, dim), dtype=np.float32)
        self.rows = 0

    def append(self, vectors: Vectors) -> int:
        """Add vectors at the end; returns the row of the first one."""
        first = self.rows
        need = first + len(vectors)
        if need > len(self._matrix):
            grown = np.zeros((max(need, 2 * len(self._matrix)), self.dim), dtype=np.float32)
            grown[:first] = self._matrix[:first]
            self._matrix = grown
        self._matrix[first:need] = vectors
        self.rows = need
        return first

    def vector(self, row: int) -> Vectors:
        vector: Vectors = self._matrix[row]
        return vector

    def cosines(self, query: Vectors) -> Vectors:
        """Cosine of every row with the (unit) query vector, dead rows included."""
        result: Vectors = np.dot(self._matrix[: self.rows], query.reshape(-1))
        return result
