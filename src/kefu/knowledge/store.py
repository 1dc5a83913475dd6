"""The knowledge base on disk: one SQLite file with entries and their vectors.

Vectors are stored (float32 BLOBs) so a restart does not embed again; the
embedder that made them is recorded and a different one means re-embedding.
Every write is one transaction and stamps the rows it writes with a new
revision, so a second process (the server while `kefu kb` runs) can tell
cheaply that something changed (PRAGMA data_version) and then exactly what
(ids and revisions, no text or vectors until they are needed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry, Kind
from kefu.sqlite_files import open_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS kb_entries (
    id TEXT PRIMARY KEY,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    category TEXT,
    lang TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    updated_at REAL NOT NULL,
    rev INTEGER NOT NULL,
    vector BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = "id, question, answer, category, lang, kind, source, updated_at, rev, vector"


class KbStore:
    """One connection, used from one thread at a time (the knowledge base's caller)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = open_wal(path)
        self._conn.executescript(SCHEMA)

    def close(self) -> None:
        self._conn.close()

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file (SQLite's own counter)."""
        value: int = self._conn.execute("PRAGMA data_version").fetchone()[0]
        return value

    def meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM kb_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def revisions(self) -> dict[str, int]:
        return dict(self._conn.execute("SELECT id, rev FROM kb_entries").fetchall())

    def load(self, ids: Iterable[str] | None = None) -> list[tuple[KbEntry, int, Vectors]]:
        """Entries with their revision and vector: all of them, or those named."""
        if ids is None:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM kb_entries ORDER BY rowid")
            return [_decode(row) for row in rows]
        out = []
        for entry_id in ids:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM kb_entries WHERE id = ?", (entry_id,)
            ).fetchone()
            if row is not None:
                out.append(_decode(row))
        return out

    def write(
        self,
        upserts: Sequence[KbEntry],
        vectors: Vectors,
        removes: Sequence[str] = (),
        *,
        meta: dict[str, str] | None = None,
    ) -> int:
        """Upsert and delete in one transaction; returns the revision the rows got."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT value FROM kb_meta WHERE key = 'rev'").fetchone()
            rev = (int(row[0]) if row else 0) + 1
            conn.executemany(
                f"INSERT OR REPLACE INTO kb_entries ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [_encode(e, rev, v) for e, v in zip(upserts, vectors, strict=True)],
            )
            conn.executemany("DELETE FROM kb_entries WHERE id = ?", [(i,) for i in removes])
            conn.executemany(
                "INSERT OR REPLACE INTO kb_meta (key, value) VALUES (?, ?)",
                [("rev", str(rev)), *(meta or {}).items()],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return rev


def _encode(e: KbEntry, rev: int, vector: Vectors) -> tuple[object, ...]:
    blob = np.asarray(vector, dtype=np.float32).tobytes()
    return (
        e.id,
        e.question,
        e.answer,
        e.category,
        e.lang,
        e.kind,
        e.source,
        e.updated_at,
        rev,
        blob,
    )


def _decode(row: Any) -> tuple[KbEntry, int, Vectors]:
    id_, question, answer, category, lang, kind, source, updated_at, rev, blob = row
    entry = KbEntry(
        id=str(id_),
        question=str(question),
        answer=str(answer),
        category=None if category is None else str(category),
        lang=str(lang),
        kind=_kind(kind),
        source=str(source),
        updated_at=float(updated_at),
    )
    vector = np.frombuffer(blob, dtype=np.float32).copy()
    return entry, int(rev), vector


def _kind(value: object) -> Kind:
    return "passage" if value == "passage" else "faq"


def stored_sources(path: Path) -> frozenset[str]:
    """The sources of the entries in a knowledge-base file (none when there is no file
    yet): what the server's start decides the demo by. Any other failure is raised: a
    shop's knowledge base read as empty would be given the demo's entries."""
    if not path.exists():
        return frozenset()
    conn = open_wal(path)  # with the busy timeout: `kefu kb` may be writing
    try:
        tables = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'kb_entries'")
        if tables.fetchone() is None:  # a file made before its table
            return frozenset()
        rows = conn.execute("SELECT DISTINCT source FROM kb_entries").fetchall()
    finally:
        conn.close()
    return frozenset(str(source) for (source,) in rows)
