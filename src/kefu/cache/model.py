"""What the answer cache stores and returns, and its SQLite schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    question TEXT NOT NULL,
    norm TEXT NOT NULL,
    answer TEXT NOT NULL,
    sources TEXT NOT NULL,
    vector BLOB NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,
    last_used REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS answers_by_question ON answers(scope, norm);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lookups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    scope TEXT NOT NULL,
    question TEXT NOT NULL,
    nearest TEXT,
    distance REAL,
    kind TEXT NOT NULL,
    rejected TEXT
);
"""


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    id: str
    scope: str
    question: str
    answer: str
    sources: tuple[str, ...]  # KB entry ids the answer was generated from
    created_at: float
    expires_at: float
    hits: int


@dataclass(frozen=True, slots=True)
class Lookup:
    answer: CachedAnswer | None  # what to serve, or None
    kind: Literal["exact", "semantic", "miss"]
    distance: float | None  # to the entry served, else to the nearest; None: nothing compared
    nearest: str | None  # that entry's question
    rejected: str | None  # why nothing was served: a guard reason, "above threshold", ...


@dataclass(frozen=True, slots=True)
class LookupRecord:
    at: float
    scope: str
    question: str
    nearest: str | None
    distance: float | None
    kind: str
    rejected: str | None
