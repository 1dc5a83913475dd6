"""The demo's shipped vectors: complete, current, and what the embedder computes."""

from __future__ import annotations

import dataclasses
from importlib import resources

import numpy as np

from kefu.knowledge import demo_vectors
from kefu.knowledge.base import EMBED_SCHEME, blend, embed_texts
from kefu.knowledge.embedder import E5Embedder
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.importers import parse_bytes

STALE = "the demo changed: run scripts/embed-demo to recompute src/kefu/knowledge/demo/vectors.npz"


def demo_entries() -> list[KbEntry]:
    folder = resources.files("kefu.knowledge").joinpath("demo")
    entries: list[KbEntry] = []
    for item in folder.iterdir():
        if item.name.endswith(".csv"):
            parsed = parse_bytes(item.read_bytes(), item.name)
            entries += [dataclasses.replace(e, source="demo") for e in parsed]
    return entries


def shipped(embedder: E5Embedder) -> dict[str, np.typing.NDArray[np.float32]]:
    known = demo_vectors.load(f"{embedder.name}/{embedder.dim}/{EMBED_SCHEME}")
    assert known, f"{STALE} (none for this embedder and scheme)"
    return known


def test_every_demo_entry_has_a_current_vector() -> None:
    known = shipped(E5Embedder())
    entries = demo_entries()
    missing = [e.question for e in entries if demo_vectors.digest(embed_texts(e)) not in known]
    assert not missing, f"{STALE}; missing: {missing[:3]}"


def test_shipped_vectors_are_what_the_embedder_computes() -> None:
    embedder = E5Embedder()
    known = shipped(embedder)
    for entry in demo_entries()[::97]:  # a few, spread over both languages
        full, question = embed_texts(entry)
        fresh = blend(embedder.embed_passages([full]), embedder.embed_passages([question]))[0]
        stored = known[demo_vectors.digest((full, question))]
        assert float(np.dot(fresh, stored)) > 0.999, entry.question
