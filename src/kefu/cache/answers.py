"""The answer cache: exact by normalised text, then semantic behind the entity guard.

Precision first. A near match is served only when it is within ``threshold``
cosine distance (chosen by ``kefu cache tune`` for a target precision) and the
guard finds the same numbers, ids, places, names, negations and contrasts. A
question carrying the customer's own data (order number, email, phone, link)
is never stored and never looked up. Entries live in a scope (persona x
tenant), expire after ``ttl`` seconds, and the least recently used go first
past ``max_entries``.

SQLite holds the entries and the last ``max_lookups`` lookups (the material
for tuning); memory holds the live entries and one vector matrix per scope, so
a lookup is a dict probe, one matvec and a few guard checks (about a
millisecond at 10 000 entries). A lookup reads memory only and never waits for the
disk (the server runs it on its event loop): what it learns (the lookup itself, hit
counts, answers that expired) is written by ``flush``. The ``kefu cache`` command edits
the same file from another process; ``refresh()`` notices through ``PRAGMA
data_version`` (the server refreshes and flushes every couple of seconds).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kefu.cache.guard import compare
from kefu.cache.model import SCHEMA, CachedAnswer, Lookup, LookupRecord
from kefu.cache.vectors import Rows, unit_row
from kefu.knowledge.embedder import Vectors
from kefu.sqlite_files import open_wal
from kefu.text.entities import Salient, salient
from kefu.text.message import Message
from kefu.text.normalize import normalize

log = logging.getLogger("kefu.cache")

CANDIDATES = 4  # near entries the guard may check before the lookup is a miss
PERSONAL = "personal data"
ABOVE_THRESHOLD = "above threshold"

__all__ = ["AnswerCache", "CachedAnswer", "Lookup", "LookupRecord"]


@dataclass(slots=True)
class _Entry:
    answer: CachedAnswer
    norm: str
    facts: Salient


class AnswerCache:
    """Not thread-safe: the server's fast path lets one thread at a time use it."""

    def __init__(
        self,
        path: Path,
        *,
        threshold: float,
        ttl: float,
        max_entries: int = 10_000,
        max_lookups: int = 10_000,
        clock: Callable[[], float] = time.time,
        embedder: str | None = None,
    ) -> None:
        """``embedder`` names what made the vectors (name and dimension): answers stored
        under another one are dropped, their vectors being in another space. The
        ``kefu cache`` command passes None: it reads and evicts, never compares."""
        if ttl <= 0 or max_entries < 1 or not 0 <= threshold <= 2:
            raise ValueError("answer cache: ttl > 0, max_entries >= 1, 0 <= threshold <= 2")
        self.path, self.threshold, self.ttl = path, threshold, ttl
        self.max_entries, self.max_lookups = max_entries, max_lookups
        self._clock = clock
        self._db = open_wal(path)
        self._db.executescript(SCHEMA)
        if embedder is not None:
            self._adopt(embedder)
        # Gathered while serving, written by flush(): (lookup row), id -> (hits, last use).
        self._unrecorded: list[tuple[float, str, str, str | None, float | None, str, str | None]]
        self._unrecorded = []
        self._used: dict[str, tuple[int, float]] = {}
        self._expired = False  # answers expired in memory whose rows are still in the file
        self._version = -1
        self._reset()
        self.refresh()

    @staticmethod
    def scope(persona: str, tenant: str) -> str:
        """Entries answer in one voice for one shop: a new persona starts empty."""
        return hashlib.sha1(persona.encode()).hexdigest()[:8] + ":" + tenant

    # --- serving ----------------------------------------------------------------------

    def lookup(self, scope: str, question: str | Message, vector: Vectors) -> Lookup:
        """Memory only: another connection's changes wait for ``refresh``, and what the
        lookup changes for ``flush``. A ``Message`` brings its entities read already."""
        now = self._clock()
        self._expire(now)
        if isinstance(question, Message):
            normal, facts, question = question.normal, question.entities, question.raw
        else:
            normal, facts = normalize(question), salient(question)
        result = self._find(scope, normal, vector, facts)
        if result.answer is not None:
            entry = self._entries[result.answer.id]
            entry.answer = replace(entry.answer, hits=entry.answer.hits + 1)
            self._lru.move_to_end(entry.answer.id)
            self._used[entry.answer.id] = (entry.answer.hits, now)
            result = replace(result, answer=entry.answer)
        if result.rejected != PERSONAL:  # the customer's own data is not kept
            found = (result.nearest, result.distance, result.kind, result.rejected)
            self._unrecorded.append((now, scope, question, *found))
        return result

    def flush(self) -> None:
        """Write the lookups and hit counts gathered since the last flush, in one commit.

        Serving never waits for the disk: the server flushes every couple of seconds,
        and ``lookups`` and ``close`` flush first."""
        if not self._unrecorded and not self._used and not self._expired:
            return
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if self._expired:
                self._delete_expired_rows(self._clock())
            self._db.executemany(
                "INSERT INTO lookups (at, scope, question, nearest, distance, kind, rejected) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                self._unrecorded,
            )
            self._db.executemany(
                "UPDATE answers SET hits = ?, last_used = ? WHERE id = ?",
                [(hits, at, entry_id) for entry_id, (hits, at) in self._used.items()],
            )
            self._db.execute(
                "DELETE FROM lookups WHERE id <= (SELECT MAX(id) FROM lookups) - ?",
                (self.max_lookups,),
            )
        self._unrecorded.clear()
        self._used.clear()

    def _find(self, scope: str, normal: str, vector: Vectors, facts: Salient) -> Lookup:
        if facts.personal:
            return Lookup(None, "miss", None, None, PERSONAL)
        exact = self._exact.get((scope, normal))
        if exact is not None:
            answer = self._entries[exact].answer
            return Lookup(answer, "exact", 0.0, answer.question, None)
        rows = self._rows.get(scope)
        if rows is None or not np.any(vector):  # no word the embedder knows: exact only
            return Lookup(None, "miss", None, None, None)
        nearest = rows.nearest(unit_row(vector), CANDIDATES)
        if not nearest:
            return Lookup(None, "miss", None, None, None)
        first = self._entries[nearest[0][0]].answer.question
        rejected: str | None = None
        for entry_id, distance in nearest:
            if distance > self.threshold:
                rejected = rejected or ABOVE_THRESHOLD
                break
            entry = self._entries[entry_id]
            verdict = compare(facts, entry.facts)
            if verdict.ok:
                return Lookup(entry.answer, "semantic", distance, entry.answer.question, None)
            rejected = rejected or verdict.reason
        return Lookup(None, "miss", nearest[0][1], first, rejected)

    def put(
        self,
        scope: str,
        question: str,
        answer: str,
        vector: Vectors,
        *,
        sources: Sequence[str] = (),
    ) -> CachedAnswer | None:
        """Store an answer; None (nothing stored) for a question with the customer's data.

        The caller decides eligibility (a first turn, an answer not drawn from the
        customer's account); this refuses only what it can see: a question naming
        an order or tracking number, an email, a phone number or a link is about one
        customer, and so is its answer. Re-putting a question replaces its entry.
        """
        facts = salient(question)
        if facts.personal or not question.strip() or not answer.strip() or not np.any(vector):
            return None  # a vector of no known word could never be matched semantically
        row = unit_row(vector)
        now = self._clock()
        norm = normalize(question)
        cached = CachedAnswer(
            id=uuid.uuid4().hex[:16],
            scope=scope,
            question=question,
            answer=answer,
            sources=tuple(sources),
            created_at=now,
            expires_at=now + self.ttl,
            hits=0,
        )
        self._drop(self._exact.get((scope, norm), ""))
        self._db.execute(
            "DELETE FROM answers WHERE scope = ? AND norm = ?", (scope, norm)
        )  # an expired twin the memory no longer holds
        self._db.execute(
            "INSERT INTO answers (id, scope, question, norm, answer, sources, vector, "
            "created_at, expires_at, hits, last_used) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (cached.id, scope, question, norm, answer, json.dumps(cached.sources),
             row.tobytes(), now, cached.expires_at, now),
        )  # fmt: skip
        self._hold(_Entry(cached, norm, facts), row)
        while len(self._entries) > self.max_entries:
            self._drop(next(iter(self._lru)))
        return cached

    # --- administration ---------------------------------------------------------------

    def invalidate(
        self,
        *,
        source_ids: Collection[str] = (),
        near: Vectors | None = None,
        within: float | None = None,
    ) -> int:
        """After a KB change: drop answers made from those entries or near their questions.

        ``near`` holds the changed KB questions' vectors (one per row); ``within``
        defaults to the serving threshold (what could have been served for them).
        """
        self.refresh()
        doomed = set()
        if source_ids:
            changed = set(source_ids)
            doomed |= {i for i, e in self._entries.items() if changed & set(e.answer.sources)}
        if near is not None:
            rows = np.atleast_2d(np.asarray(near, dtype=np.float32))
            rows = rows[np.any(rows, axis=1)]  # a question of no known word is near nothing
            rows = np.stack([unit_row(row) for row in rows]) if len(rows) else rows
            reach = self.threshold if within is None else within
            for index in self._rows.values():
                doomed.update(index.within(rows, reach))
        for entry_id in doomed:
            self._drop(entry_id)
        return len(doomed)

    def entries(self, scope: str | None = None) -> list[CachedAnswer]:
        """Live entries, newest first."""
        self.refresh()
        self._expire(self._clock())
        live = [e.answer for e in self._entries.values() if scope in (None, e.answer.scope)]
        return sorted(live, key=lambda answer: answer.created_at, reverse=True)

    def evict(
        self, *, ids: Collection[str] = (), scope: str | None = None, everything: bool = False
    ) -> int:
        """Remove entries by id, by scope or all; returns how many rows went (expired too)."""
        self.refresh()
        params: tuple[str, ...] = ()
        if everything:
            where = "1"
        elif scope is not None:
            where, params = "scope = ?", (scope,)
        else:
            ids = list(ids)
            where, params = f"id IN ({','.join('?' * len(ids))})", tuple(ids)
        if not params and not everything:
            return 0
        doomed = [r[0] for r in self._db.execute(f"SELECT id FROM answers WHERE {where}", params)]
        for entry_id in doomed:
            self._drop(entry_id)
        self._db.execute(f"DELETE FROM answers WHERE {where}", params)  # expired rows too
        return len(doomed)

    def purge_expired(self) -> int:
        """Delete expired rows from the file (memory never holds them past a lookup; a
        flush deletes those a lookup found)."""
        now = self._clock()
        self._expire(now)
        return self._delete_expired_rows(now)

    def _delete_expired_rows(self, now: float) -> int:
        self._expired = False  # whatever memory found expired by now goes with them
        return self._db.execute("DELETE FROM answers WHERE expires_at <= ?", (now,)).rowcount

    def lookups(self, limit: int = 1000) -> list[LookupRecord]:
        """The most recent lookups, newest first: question pairs to label for tuning."""
        self.flush()
        rows = self._db.execute(
            "SELECT at, scope, question, nearest, distance, kind, rejected FROM lookups "
            "ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [LookupRecord(*row) for row in rows]

    def refresh(self) -> bool:
        """Reload if another connection (the ``kefu cache`` CLI) changed the file."""
        version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        if version == self._version:
            return False
        self._version = version
        self.flush()  # the hits counted so far, before the reload reads them back
        self._reset()
        rows = self._db.execute(
            "SELECT id, scope, question, norm, answer, sources, vector, created_at, expires_at, "
            "hits FROM answers WHERE expires_at > ? ORDER BY last_used",
            (self._clock(),),
        )
        for id_, scope, question, norm, answer, sources, blob, created, expires, hits in rows:
            cached = CachedAnswer(
                id_, scope, question, answer, tuple(json.loads(sources)), created, expires, hits
            )
            vector = np.frombuffer(blob, dtype=np.float32).copy()
            self._hold(_Entry(cached, norm, salient(question)), vector)
        return True

    def close(self) -> None:
        self.flush()
        self._db.close()

    # --- internals --------------------------------------------------------------------

    def _adopt(self, embedder: str) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        if row is not None and row[0] == embedder:
            return
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            dropped = self._db.execute("DELETE FROM answers").rowcount
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder', ?)", (embedder,)
            )
        if dropped:
            log.info("answer cache: dropped %d answers embedded by another embedder", dropped)

    def _reset(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._exact: dict[tuple[str, str], str] = {}
        self._rows: dict[str, Rows] = {}  # per scope
        self._lru: OrderedDict[str, None] = OrderedDict()  # least recently used first
        self._expiry: list[tuple[float, str]] = []  # heap of (expires_at, id)

    def _hold(self, entry: _Entry, vector: Vectors) -> None:
        answer = entry.answer
        self._entries[answer.id] = entry
        self._exact[(answer.scope, entry.norm)] = answer.id
        self._rows.setdefault(answer.scope, Rows(len(vector))).add(answer.id, vector)
        self._lru[answer.id] = None
        heapq.heappush(self._expiry, (answer.expires_at, answer.id))
        if len(self._expiry) > 2 * len(self._entries) + 64:
            # Replaced and evicted ids wait in the heap until they expire (--cache-ttl, a
            # day): under churn that is every put of the day. Rebuilt from what is held.
            self._expiry = [(e.answer.expires_at, i) for i, e in self._entries.items()]
            heapq.heapify(self._expiry)

    def _drop(self, entry_id: str) -> None:
        if self._forget(entry_id):
            self._db.execute("DELETE FROM answers WHERE id = ?", (entry_id,))

    def _forget(self, entry_id: str) -> bool:
        """Take an entry out of memory; False if it was not there."""
        entry = self._entries.pop(entry_id, None)
        if entry is None:
            return False
        answer = entry.answer
        del self._exact[(answer.scope, entry.norm)]
        self._rows[answer.scope].remove(entry_id)
        del self._lru[entry_id]
        return True

    def _expire(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            _, entry_id = heapq.heappop(self._expiry)
            # A replaced or evicted id is gone already; the file's row goes at the next flush.
            self._expired |= self._forget(entry_id)
