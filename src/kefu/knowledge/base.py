"""KnowledgeBase: the SQLite file and the in-memory hybrid index, kept in step.

Every change goes to disk first (one transaction) and then to the index
(incrementally, no rebuild), and is reported as a KbChange so the answer cache
can drop exactly the entries it affects. Another process (`kefu kb import`
while the server runs) may change the file: refresh() notices that with one
PRAGMA and applies the difference; add() and remove() apply it first too, and
report it with their own change, so no change goes unreported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kefu.errors import NotFound
from kefu.knowledge.bm25 import terms_of
from kefu.knowledge.embedder import Embedder, Vectors, embed_message
from kefu.knowledge.entries import KbEntry, entry_id, id_of_normal
from kefu.knowledge.index import Hit, HybridIndex
from kefu.knowledge.kb_words import AnswerGroup, KbWords, entry_words
from kefu.knowledge.store import KbStore
from kefu.knowledge.vocabulary import Vocabulary
from kefu.text.entities import Salient
from kefu.text.message import Message

__all__ = ["Hit", "KbChange", "KnowledgeBase", "blend", "embed_texts"]

KB_FILE = "knowledge.db"  # in the data dir
EMBED_BATCH = 16
# An entry's vector is normalize(W_FULL * e(question + answer) + (1 - W_FULL) * e(question)):
# the answer's words let a paraphrase match what the answer talks about ("is shipping
# free?" -> the shipping-cost answer), the question alone keeps the entry's focus.
# On the demo paraphrases (dev split) top-1 was EN 0.90 / ZH 0.89 with the full text
# alone, 0.85 / 0.81 with the question alone, 0.97 / 0.90 blended (benchmarks/retrieval.py).
W_FULL = 0.7
# Changed whenever the recipe above changes, so stored vectors are recomputed.
EMBED_SCHEME = "qa0.7+q0.3"

Progress = Callable[[int, int], None]


def embed_texts(entry: KbEntry) -> tuple[str, str]:
    """The two texts an entry's vector blends: the whole entry, and its question alone."""
    return f"{entry.question}\n{entry.answer}", entry.question


def blend(full: Vectors, question: Vectors) -> Vectors:
    """Unit vectors of W_FULL * full + (1 - W_FULL) * question, row by row."""
    mixed = np.float32(W_FULL) * full + np.float32(1 - W_FULL) * question
    norms = np.linalg.norm(mixed, axis=1, keepdims=True)
    return np.asarray(mixed / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def embed_entries(
    embedder: Embedder, entries: Sequence[KbEntry], progress: Progress | None = None
) -> Vectors:
    """Each entry's vector, in batches (``progress(done, total)`` after each)."""
    out = np.zeros((len(entries), embedder.dim), dtype=np.float32)
    for start in range(0, len(entries), EMBED_BATCH):
        batch = entries[start : start + EMBED_BATCH]
        texts = [embed_texts(entry) for entry in batch]
        full = embedder.embed_passages([text for text, _ in texts])
        question = embedder.embed_passages([text for _, text in texts])
        out[start : start + len(batch)] = blend(full, question)
        if progress is not None:
            progress(start + len(batch), len(entries))
    return out


# What an import thread computes ahead for ``KnowledgeBase.add(ready=...)``: by the texts
# an entry's vector and words come from (``embed_texts``), its vector and its words.
Ready = Mapping[tuple[str, str], tuple[Vectors, list[str]]]


def prepared(embedder: Embedder, to_embed: Sequence[KbEntry]) -> Ready:
    """The vectors and words of the entries ``add`` would have to embed
    (``needing_vectors``), computed away from the knowledge base's thread."""
    vectors = embed_entries(embedder, to_embed)
    return {embed_texts(e): (vectors[i], entry_words(e)) for i, e in enumerate(to_embed)}


@dataclass(frozen=True, slots=True)
class KbChange:
    added: list[KbEntry] = field(default_factory=list)
    updated: list[KbEntry] = field(default_factory=list)  # the new versions
    removed: list[KbEntry] = field(default_factory=list)  # the versions that were removed

    @property
    def touched(self) -> list[KbEntry]:
        return [*self.added, *self.updated, *self.removed]

    def __bool__(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def __add__(self, other: KbChange) -> KbChange:
        return KbChange(
            [*self.added, *other.added],
            [*self.updated, *other.updated],
            [*self.removed, *other.removed],
        )


class KnowledgeBase:
    """Not thread-safe: the server's fast path lets one thread at a time use it; the CLI
    uses it from its only thread."""

    def __init__(self, store: KbStore, embedder: Embedder) -> None:
        self._store = store
        self._embedder = embedder
        self._index = HybridIndex(embedder.dim)
        self._words = KbWords(embedder)  # kept in step by _put and _drop
        self._revs: dict[str, int] = {}
        self._version = -1

    @classmethod
    def open(cls, path: Path, embedder: Embedder) -> KnowledgeBase:
        """Open (or create) the file, load entries and vectors, build the indexes."""
        kb = cls(KbStore(path), embedder)
        try:
            kb._load()
        except BaseException:
            kb.close()
            raise
        return kb

    @property
    def vector_key(self) -> str:
        return f"{self._embedder.name}/{self._embedder.dim}/{EMBED_SCHEME}"

    def _load(self) -> None:
        self._version = self._store.data_version()  # before reading: a later commit shows
        rows = self._store.load()
        if not rows:
            return
        entries = [entry for entry, _, _ in rows]
        if self._store.meta("vectors") == self.vector_key:
            vectors = np.stack([vector for _, _, vector in rows])
            self._revs = {entry.id: rev for entry, rev, _ in rows}
        else:  # another embedder (or recipe) made them: embed again, once
            vectors = self._embed(entries, None)
            rev = self._store.write(entries, vectors, meta={"vectors": self.vector_key})
            self._revs = {entry.id: rev for entry in entries}
        self._put(entries, vectors)

    def _put(
        self, entries: Sequence[KbEntry], vectors: Vectors, ready: Ready | None = None
    ) -> None:
        """Upsert into the index and the words, which are kept in step entry by entry
        (an entry whose texts did not change keeps its words: no second cut)."""
        for entry in entries:
            old = self._index.get(entry.id)
            computed = (ready or {}).get(embed_texts(entry))
            words = None if computed is None else computed[1]
            if old is not None:
                if embed_texts(old) == embed_texts(entry):
                    words = self._words.words_of(old)
                self._words.remove(old)
            self._words.add(entry, words)
        self._index.upsert(entries, vectors)

    def _drop(self, ids: Sequence[str]) -> None:
        for doomed in ids:
            old = self._index.get(doomed)
            if old is not None:
                self._words.remove(old)
        self._index.remove(ids)

    def __len__(self) -> int:
        return len(self._index)

    def prepare(self) -> None:
        """Build now what the FAQ guard reads, so no customer's message waits for it."""
        self._words.prepare()

    def exact(self, message: str | Message) -> KbEntry | None:
        """The FAQ entry whose question is the message, word for word (case, spaces and
        edge punctuation aside): a clicked suggestion, a copied question. No model needed:
        an entry's id is the digest of its normalised question."""
        found = id_of_normal(message.normal) if isinstance(message, Message) else entry_id(message)
        entry = self._index.get(found)
        return entry if entry is not None and entry.kind == "faq" else None

    def answer(self, entry: KbEntry) -> AnswerGroup:
        """The entry's answer with every question it answers: what the FAQ guard
        compares a message with."""
        return self._words.answer(entry)

    def phrasings(self, entry: KbEntry, excluded: frozenset[str] = frozenset()) -> int:
        """How many questions the entry's answer has, leaving ``excluded`` entries out
        (a calibration probe's)."""
        return len(self.answer(entry).entries.keys() - excluded)

    def unread(self, limit: int) -> list[str]:
        """Texts of FAQ entries whose entities the guard has not read yet: for
        ``kb_words.read_texts`` on another thread, then ``learn``."""
        return self._words.unread(limit)

    def learn(self, facts: Mapping[str, Salient]) -> None:
        """Keep the entities ``read_texts`` found of texts ``unread`` gave."""
        self._words.learn(facts)

    @property
    def vocabulary(self) -> Vocabulary:
        """Every word the entries use (questions and answers), for the FAQ guard."""
        return self._words.vocabulary

    @property
    def catalogue(self) -> Vocabulary:
        """The products the catalogue entries (category ``catalogue``) list: what the shop sells."""
        return self._words.catalogue

    def get(self, entry_id: str) -> KbEntry | None:
        return self._index.get(entry_id)

    def entries(self, *, category: str | None = None) -> list[KbEntry]:
        """By category, then question; only one category's when ``category`` is given."""
        chosen = [e for e in self._index if category is None or e.category == category]
        return sorted(chosen, key=lambda e: (e.category or "", e.question))

    def search(
        self,
        query: str | Message,
        *,
        query_vector: Vectors | None = None,
        k: int = 5,
        kind: str | None = None,
    ) -> list[Hit]:
        """Best entries first. ``query_vector`` (from embed_queries) saves embedding twice
        when the caller (the answer cache) has embedded the message already."""
        if not len(self._index):
            return []
        if query_vector is None:
            if isinstance(query, Message):
                query_vector = embed_message(self._embedder, query)
            else:
                query_vector = self._embedder.embed_queries([query])[0]
        return self._index.search(terms_of(query), query_vector, k=k, kind=kind)

    def add(
        self,
        entries: Sequence[KbEntry],
        *,
        progress: Progress | None = None,
        ready: Ready | None = None,
    ) -> KbChange:
        """Upsert by id in one transaction; the same entry again changes nothing.
        ``ready`` are vectors and words an import thread computed (``prepared``)."""
        pending = self.refresh()
        latest = {entry.id: entry for entry in entries}  # the last of repeated ids wins
        added: list[KbEntry] = []
        updated: list[KbEntry] = []
        for entry in latest.values():
            old = self._index.get(entry.id)
            if old is None:
                added.append(entry)
            elif not old.same_content(entry):
                updated.append(entry)
        writes = added + updated
        if not writes:
            return pending
        vectors = self._vectors_for(writes, progress, ready or {})
        rev = self._store.write(writes, vectors, meta={"vectors": self.vector_key})
        self._put(writes, vectors, ready)
        self._revs.update((entry.id, rev) for entry in writes)
        return pending + KbChange(added, updated)

    def _vectors_for(
        self, entries: list[KbEntry], progress: Progress | None, ready: Ready
    ) -> Vectors:
        """Embed what is new; an update of the category or source only keeps its vector."""
        vectors = np.zeros((len(entries), self._embedder.dim), dtype=np.float32)
        todo: list[int] = []
        for i, entry in enumerate(entries):
            if not self._needs_vector(entry):
                vectors[i] = self._index.vector(entry.id)
            elif embed_texts(entry) in ready:
                vectors[i] = ready[embed_texts(entry)][0]
            else:
                todo.append(i)
        if todo:
            vectors[todo] = self._embed([entries[i] for i in todo], progress)
        return vectors

    def _embed(self, entries: Sequence[KbEntry], progress: Progress | None) -> Vectors:
        return embed_entries(self._embedder, entries, progress)

    def needing_vectors(self, entries: Sequence[KbEntry]) -> list[KbEntry]:
        """The entries ``add`` would have to embed (new, or with new text)."""
        return [entry for entry in entries if self._needs_vector(entry)]

    def _needs_vector(self, entry: KbEntry) -> bool:
        old = self._index.get(entry.id)
        return old is None or embed_texts(old) != embed_texts(entry)

    def remove(self, ids: Sequence[str]) -> KbChange:
        """All or nothing: an unknown id raises NotFound and removes none."""
        pending = self.refresh()
        unique = list(dict.fromkeys(ids))
        missing = [entry_id for entry_id in unique if self._index.get(entry_id) is None]
        if missing:
            raise NotFound(f"no knowledge entry with id {', '.join(missing)}")
        removed = [entry for entry_id in unique if (entry := self._index.get(entry_id))]
        empty = np.zeros((0, self._embedder.dim), dtype=np.float32)
        self._store.write([], empty, unique)
        self._drop(unique)
        for gone_id in unique:
            del self._revs[gone_id]
        return pending + KbChange(removed=removed)

    def refresh(self) -> KbChange:
        """Apply what another process committed since we last looked (cheap when nothing)."""
        version = self._store.data_version()
        if version == self._version:
            return KbChange()
        self._version = version
        on_disk = self._store.revisions()
        gone = [entry_id for entry_id in self._revs if entry_id not in on_disk]
        changed = [i for i, rev in on_disk.items() if self._revs.get(i) != rev]
        removed = [entry for i in gone if (entry := self._index.get(i))]
        rows = self._store.load(changed)
        added: list[KbEntry] = []
        updated: list[KbEntry] = []
        writes: list[KbEntry] = []
        vectors: list[Vectors] = []
        reuse = self._store.meta("vectors") == self.vector_key
        for entry, rev, vector in rows:
            old = self._index.get(entry.id)
            self._revs[entry.id] = rev
            if old is not None and old.same_content(entry):
                continue
            (added if old is None else updated).append(entry)
            writes.append(entry)
            ok = reuse and vector.shape == (self._embedder.dim,)
            vectors.append(vector if ok else self._embed([entry], None)[0])
        self._drop(gone)
        for gone_id in gone:
            del self._revs[gone_id]
        if writes:
            self._put(writes, np.stack(vectors))
        return KbChange(added, updated, removed)

    def close(self) -> None:
        self._store.close()
