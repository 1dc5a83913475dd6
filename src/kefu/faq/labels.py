"""What the calibration stands on: messages with what is known of their answer.

Three sources, all of them real wording (nothing is made up from the entries):

- the knowledge base's own phrasings: each question of an answer with several, held out
  of both looks (its other questions should still find the answer). Not its questions
  asked with their whole answer held out: on the tuning sets such a question was often
  answered by a neighbouring entry (HWU64's alarm_query beside alarm_set), so "nothing
  answers it" was a wrong label at the top of the scale, where it stopped every test;
- reviewed misses: an accepted one is a phrasing from then on; a rejected one
  (``kefu kb misses reject``) is a message nothing answers;
- verdicts from traffic (``LabelLog``): a judge's yes or no on whether an entry's answer
  answers a customer's message (``faq/judge.py``).
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kefu.knowledge.entries import KbEntry, answer_key
from kefu.knowledge.misses import MissLog
from kefu.sqlite_files import open_wal

Source = Literal["phrasing", "review", "judge"]
LABELS_FILE = "faq_labels.db"  # in the data dir
# Phrasings held out per fit at most (each takes an e5 pass, ~17 ms): a large knowledge
# base is sampled, not walked.
MAX_PHRASINGS = 600
# Verdicts from traffic read per fit: the latest.
MAX_VERDICTS = 3000


@dataclass(frozen=True, slots=True)
class Label:
    text: str
    source: Source
    right: str | None = None  # the answer key that answers it
    wrong: str | None = None  # an answer key that does not (the rest unknown)
    excluded: frozenset[str] = frozenset()  # entry ids held out of both looks

    def verdict(self, answer: str) -> bool | None:
        """Whether a candidate with this answer key is right; None: unknown."""
        if self.right is not None:
            return answer == self.right
        if self.wrong is not None:
            return False if answer == self.wrong else None
        return False  # nothing answers it


def own_labels(entries: Sequence[KbEntry], seed: str) -> list[Label]:
    """The knowledge base's phrasings of answers with several, each held out alone."""
    groups: dict[str, list[KbEntry]] = {}
    for entry in sorted(entries, key=lambda e: e.id):
        if entry.kind == "faq":
            groups.setdefault(answer_key(entry.answer), []).append(entry)
    questions = [
        (key, entry) for key in sorted(groups) if len(groups[key]) > 1 for entry in groups[key]
    ]
    if len(questions) > MAX_PHRASINGS:
        questions = random.Random(seed).sample(questions, MAX_PHRASINGS)
    return [
        Label(entry.question, "phrasing", right=key, excluded=frozenset({entry.id}))
        for key, entry in questions
    ]


SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message TEXT NOT NULL,
    answer TEXT NOT NULL,  -- the answer key judged
    verdict INTEGER NOT NULL,  -- 1: it answers the message
    at REAL NOT NULL
)
"""


class LabelLog:
    """The judge's verdicts, kept in ``DATA_DIR/faq_labels.db``: the server writes them
    after replies, the fit reads the latest."""

    def __init__(self, path: Path) -> None:
        self._db: sqlite3.Connection = open_wal(path)
        self._db.executescript(SCHEMA)

    def add(self, message: str, answer: str, verdict: bool) -> None:
        self._db.execute(
            "INSERT INTO verdicts (message, answer, verdict, at) VALUES (?, ?, ?, ?)",
            (message, answer_key(answer), int(verdict), time.time()),
        )

    def revision(self) -> int:
        """Grows with every verdict: a fit is stale once it does."""
        row = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM verdicts").fetchone()
        return int(row[0])

    def labels(self, limit: int = MAX_VERDICTS) -> list[Label]:
        rows = self._db.execute(
            "SELECT message, answer, verdict FROM verdicts ORDER BY id DESC LIMIT ?", (limit,)
        ).fetchall()
        return [
            Label(message, "judge", right=key) if verdict else Label(message, "judge", wrong=key)
            for message, key, verdict in rows
        ]

    def evidence(self, answer: str) -> int:
        """Verdicts on one answer so far: the judge asks less about a well-known one."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM verdicts WHERE answer = ?", (answer_key(answer),)
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()


def fingerprint(entries: Sequence[KbEntry], *revisions: int) -> str:
    """What a model was fitted to: the entries' ids and answers, and how many verdicts
    and reviews there were."""
    digest = hashlib.sha1()
    for entry in sorted(entries, key=lambda e: e.id):
        digest.update(f"{entry.id}\t{entry.kind}\t{answer_key(entry.answer)}\n".encode())
    digest.update(" ".join(map(str, revisions)).encode())
    return digest.hexdigest()[:16]


def current(
    entries: Sequence[KbEntry], misses: MissLog, verdicts: LabelLog
) -> tuple[str, list[Label]]:
    """The state a model is fitted to (the entries, the reviews, the verdicts) and its
    labels: the server's background fit and ``kefu kb calibrate`` read the same."""
    rejected = misses.top(10**6, "rejected")
    prints = fingerprint(entries, len(rejected), verdicts.revision())
    reviewed = [Label(miss.message, "review") for miss in rejected]
    return prints, [*own_labels(entries, prints), *reviewed, *verdicts.labels()]
