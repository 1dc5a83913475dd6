"""Precomputed vectors of the bundled demo knowledge base.

Embedding the demo's few hundred phrasings takes seconds on a small CPU, and a
newcomer's first ``kefu serve`` should answer at once; so the vectors ship
beside the CSV files. Each is keyed by a digest of the texts it was embedded
from, so an edited entry is embedded afresh, never served a stale vector.
Regenerate with ``scripts/embed-demo`` after editing the demo.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from kefu.knowledge.embedder import Vectors

FILE = "vectors.npz"


def digest(texts: Sequence[str]) -> str:
    return hashlib.sha1("\0".join(texts).encode("utf-8")).hexdigest()


def load(vector_key: str) -> dict[str, Vectors]:
    """Digest -> vector, empty when there is no file or it was made by another embedder."""
    source = resources.files("kefu.knowledge").joinpath("demo", FILE)
    if not source.is_file():
        return {}
    with source.open("rb") as f, np.load(f) as data:
        if str(data["key"]) != vector_key:
            return {}
        vectors = np.asarray(data["vectors"], dtype=np.float32)
        return {str(d): vectors[i] for i, d in enumerate(data["digests"])}


def save(path: Path, vectors_by_digest: Mapping[str, Vectors], vector_key: str) -> None:
    digests = sorted(vectors_by_digest)
    np.savez_compressed(
        path,
        key=np.array(vector_key),
        digests=np.array(digests),
        vectors=np.stack([vectors_by_digest[d] for d in digests]).astype(np.float32),
    )
