"""Questions the knowledge base nearly answered: where to add the customers' words.

The FAQ tier answers only messages that speak the knowledge base's words; a message
it declines (below the threshold, too close to another answer, or stopped by the FAQ
guard) goes to the LLM with the passages. Those messages are the phrasings the
knowledge base lacks, so they are kept here (``DATA_DIR/misses.db``), counted per
normalised message with the best entry and the reason, and ``kefu kb misses`` lists
them, or writes them as question,answer rows to check and import: the knowledge
base learns the words its customers use. A message carrying the customer's own data
(an order number, an email, a phone number) is never kept.

Each miss has a number that stays its own (``kefu kb misses accept ID [ENTRY_ID]``):
a reviewer accepts a miss as a new question of the entry whose answer answers it
(``phrasing``), or rejects it; either way it leaves the open list, and a message
seen again after that is counted on its reviewed row, not listed again. An accepted
miss changes the knowledge base, so the calibration is fitted again with the
customer's own wording among its probes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kefu.errors import InvalidRequest, NotFound
from kefu.knowledge.entries import KbEntry
from kefu.sqlite_files import open_wal
from kefu.text.entities import salient
from kefu.text.message import Message, as_message

MISSES_FILE = "misses.db"  # in the data dir
State = Literal["open", "accepted", "rejected"]
STATES: tuple[State, ...] = ("open", "accepted", "rejected")
# AUTOINCREMENT: a number a reviewer was shown never names another miss later, even
# after the oldest rows were trimmed.
SCHEMA = """
CREATE TABLE IF NOT EXISTS misses (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    norm TEXT NOT NULL UNIQUE,
    message TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    score REAL NOT NULL,
    reason TEXT NOT NULL,
    count INTEGER NOT NULL,
    last_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'open'
);
"""
_COLUMNS = "id, message, entry_id, question, answer, score, reason, count, last_at, state"
_KEPT = "norm, message, entry_id, question, answer, score, reason, count, last_at"


@dataclass(frozen=True, slots=True)
class Miss:
    id: int
    message: str
    entry_id: str  # the best knowledge-base entry, declined
    question: str
    answer: str
    score: float
    reason: str
    count: int
    last_at: float
    state: State


def phrasing(miss: Miss, entry: KbEntry) -> KbEntry:
    """The miss as a new question of ``entry``'s answer: what accepting it adds."""
    if entry.kind != "faq":
        raise InvalidRequest(
            f"entry {entry.id} is a passage, not an FAQ answer: a miss becomes a question "
            "of an FAQ entry",
            param="entry_id",
        )
    return KbEntry.make(miss.message, entry.answer, category=entry.category, source="misses")


def _migrate(db: sqlite3.Connection) -> None:
    """A miss log written before misses had numbers and states: keep its rows."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(misses)")}
    if not columns or "id" in columns:
        return
    with db:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ALTER TABLE misses RENAME TO misses_before_ids")
        db.executescript(SCHEMA.replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE"))
        db.execute(
            f"INSERT INTO misses ({_KEPT}) SELECT {_KEPT} FROM misses_before_ids ORDER BY last_at"
        )
        db.execute("DROP TABLE misses_before_ids")


class MissLog:
    """Not thread-safe: the server's fast path lets one thread at a time record or flush."""

    def __init__(
        self, path: Path, *, max_rows: int = 10_000, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = open_wal(path)
        _migrate(self._db)
        self._db.executescript(SCHEMA)
        self._max_rows = max_rows
        self._clock = clock
        # Rows to write, each with whether its message is still to be checked for the
        # customer's own data.
        self._pending: list[tuple[tuple[str, str, str, str, str, float, str, float], bool]] = []

    def record(
        self,
        message: str | Message,
        entry: KbEntry,
        score: float,
        reason: str,
        *,
        personal: bool | None = None,
    ) -> None:
        """Keep a declined message; ``flush`` writes it, off the answer's path.
        ``personal`` is whether it carries the customer's own data, when the caller has
        read that already (``flush`` reads it otherwise)."""
        if personal:
            return
        read = as_message(message)
        row = (read.normal, read.raw, entry.id, entry.question, entry.answer, score, reason)
        self._pending.append(((*row, self._clock()), personal is None))

    def flush(self) -> None:
        rows = [
            row
            for row, unchecked in self._pending
            if row[0] and not (unchecked and salient(row[1]).personal)
        ]
        self._pending.clear()
        if not rows:
            return
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "INSERT INTO misses (norm, message, entry_id, question, answer, score, reason, "
                "count, last_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT(norm) DO UPDATE "
                "SET count = count + 1, message = excluded.message, entry_id = "
                "excluded.entry_id, question = excluded.question, answer = excluded.answer, "
                "score = excluded.score, reason = excluded.reason, last_at = excluded.last_at",
                rows,
            )
            self._db.execute(
                "DELETE FROM misses WHERE norm NOT IN "
                "(SELECT norm FROM misses ORDER BY last_at DESC LIMIT ?)",
                (self._max_rows,),
            )

    def top(self, limit: int = 50, state: State = "open") -> list[Miss]:
        """The most frequent first (then the most recent)."""
        self.flush()
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM misses WHERE state = ? "
            "ORDER BY count DESC, last_at DESC, id LIMIT ?",
            (state, limit),
        )
        return [Miss(*row) for row in rows]

    def get(self, miss_id: int) -> Miss:
        self.flush()
        row = self._db.execute(f"SELECT {_COLUMNS} FROM misses WHERE id = ?", (miss_id,)).fetchone()
        if row is None:
            raise NotFound(f"no miss {miss_id} (see `kefu kb misses`)", param="miss_id")
        return Miss(*row)

    def settle(self, miss_ids: Sequence[int], state: State) -> None:
        """Mark reviewed misses (all or none: an unknown number raises NotFound)."""
        self.flush()
        for miss_id in miss_ids:
            self.get(miss_id)
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "UPDATE misses SET state = ? WHERE id = ?", [(state, i) for i in miss_ids]
            )

    def clear(self) -> int:
        """Forget every miss, reviewed or not (after the operator has dealt with them)."""
        self.flush()
        return self._db.execute("DELETE FROM misses").rowcount

    def close(self) -> None:
        self.flush()
        self._db.close()
