"""Session store on one SQLite file, driven from a single dedicated thread.

One thread owns the connection, so SQLite never sees concurrent writers and the
event loop never waits on disk. WAL with synchronous=NORMAL: a commit does not
fsync, a power cut may lose the last turns but never corrupts the file.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from kefu.sqlite_files import open_wal
from kefu.store.base import Session, SessionMemory, SessionState, StoredMessage, Turn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'bot',
    state_reason TEXT,
    state_since REAL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at REAL NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, turn);
CREATE TABLE IF NOT EXISTS memories (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    body TEXT NOT NULL
);
"""

# Columns added after the first release: (name, declaration) for ALTER TABLE on old files.
SESSION_COLUMNS = [
    ("state", "TEXT NOT NULL DEFAULT 'bot'"),
    ("state_reason", "TEXT"),
    ("state_since", "REAL"),
    ("owner", "TEXT"),
]
SESSION_FIELDS = "id, user_id, created_at, updated_at, state, state_reason, state_since, owner"


class SqliteSessionStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kefu-sqlite")
        self._conn: sqlite3.Connection | None = None

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise RuntimeError("session store is not open")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, conn)

    async def open(self) -> None:
        def connect() -> sqlite3.Connection:
            conn = open_wal(self.path)
            conn.execute("PRAGMA foreign_keys=ON")
            conn.executescript(SCHEMA)
            present = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
            for name, declaration in SESSION_COLUMNS:
                if name not in present:
                    conn.execute(f"ALTER TABLE sessions ADD COLUMN {name} {declaration}")
            conn.execute("CREATE INDEX IF NOT EXISTS sessions_by_state ON sessions(state)")
            return conn

        loop = asyncio.get_running_loop()
        self._conn = await loop.run_in_executor(self._executor, connect)

    async def close(self) -> None:
        if self._conn is not None:
            await self._run(lambda conn: conn.close())
            self._conn = None
        self._executor.shutdown(wait=True)

    async def get_session(self, session_id: str) -> Session | None:
        return await self._run(lambda conn: _session(conn, session_id))

    async def recent_turns(self, session_id: str, turns: int) -> list[StoredMessage]:
        return await self._run(lambda conn: _recent_turns(conn, session_id, turns))

    async def resume(
        self, session_id: str, turns: int
    ) -> tuple[Session | None, list[StoredMessage]]:
        def select(conn: sqlite3.Connection) -> tuple[Session | None, list[StoredMessage]]:
            session = _session(conn, session_id)
            return session, _recent_turns(conn, session_id, turns) if session else []

        return await self._run(select)

    async def messages(self, session_id: str) -> list[StoredMessage]:
        def select(conn: sqlite3.Connection) -> list[StoredMessage]:
            rows = conn.execute(
                "SELECT role, content, created_at, meta, turn FROM messages WHERE session_id = ? "
                "ORDER BY id",
                (session_id,),
            ).fetchall()
            return [_message(row) for row in rows]

        return await self._run(select)

    async def append_turn(
        self, session_id: str, turn: Turn, user_id: str | None = None, owner: str | None = None
    ) -> int:
        now = time.time()

        def insert(conn: sqlite3.Connection) -> int:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "INSERT OR IGNORE INTO sessions (id, user_id, created_at, updated_at, owner) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (session_id, user_id, now, now, owner),
                )
                (number,) = conn.execute(
                    "SELECT COALESCE(MAX(turn), 0) + 1 FROM messages WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                conn.executemany(
                    "INSERT INTO messages (session_id, turn, role, content, created_at, meta) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (session_id, number, "user", turn.user, now, "{}"),
                        (
                            session_id,
                            number,
                            "assistant",
                            turn.assistant,
                            now,
                            json.dumps(turn.meta),
                        ),
                    ],
                )
                conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
                if turn.state is not None:
                    _set_state(conn, session_id, turn.state, turn.state_reason, now)
            return int(number)

        return await self._run(insert)

    async def delete_session(self, session_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
                conn.execute("DELETE FROM memories WHERE session_id = ?", (session_id,))
                cursor = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                return cursor.rowcount > 0

        return await self._run(delete)

    async def append_message(
        self, session_id: str, content: str, meta: dict[str, Any]
    ) -> StoredMessage | None:
        now = time.time()

        def insert(conn: sqlite3.Connection) -> StoredMessage | None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                    (turn,) = conn.execute(
                        "SELECT COALESCE(MAX(turn), 0) FROM messages WHERE session_id = ?",
                        (session_id,),
                    ).fetchone()
                    conn.execute(
                        "INSERT INTO messages (session_id, turn, role, content, created_at, meta) "
                        "VALUES (?, ?, 'assistant', ?, ?, ?)",
                        (session_id, turn, content, now, json.dumps(meta)),
                    )
                    conn.execute(
                        "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
                    )
                    return StoredMessage("assistant", content, now, meta, int(turn))
                return None

        return await self._run(insert)

    async def set_state(
        self, session_id: str, state: SessionState, reason: str | None = None
    ) -> Session | None:
        now = time.time()

        def update(conn: sqlite3.Connection) -> Session | None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                _set_state(conn, session_id, state, reason, now)
                row = conn.execute(
                    f"SELECT {SESSION_FIELDS} FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                return Session(*row) if row else None

        return await self._run(update)

    async def sessions_in_state(self, state: SessionState, limit: int = 100) -> list[Session]:
        def select(conn: sqlite3.Connection) -> list[Session]:
            rows = conn.execute(
                f"SELECT {SESSION_FIELDS} FROM sessions WHERE state = ? "
                "ORDER BY state_since LIMIT ?",
                (state, limit),
            ).fetchall()
            return [Session(*row) for row in rows]

        return await self._run(select)

    async def load_memory(self, session_id: str) -> SessionMemory | None:
        def select(conn: sqlite3.Connection) -> SessionMemory | None:
            row = conn.execute(
                "SELECT body FROM memories WHERE session_id = ?", (session_id,)
            ).fetchone()
            return SessionMemory.from_dict(json.loads(row[0])) if row else None

        return await self._run(select)

    async def save_memory(self, session_id: str, memory: SessionMemory) -> bool:
        body = json.dumps(memory.as_dict())

        def upsert(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                cursor = conn.execute(
                    "INSERT INTO memories (session_id, body) SELECT id, ? FROM sessions "
                    "WHERE id = ? ON CONFLICT(session_id) DO UPDATE SET body = excluded.body",
                    (body, session_id),
                )
                return cursor.rowcount > 0

        return await self._run(upsert)


def _set_state(
    conn: sqlite3.Connection, session_id: str, state: str, reason: str | None, now: float
) -> None:
    # state_since keeps the first time of a state the session is already in.
    conn.execute(
        "UPDATE sessions SET state_since = CASE WHEN state = ? THEN state_since ELSE ? END, "
        "state = ?, state_reason = ? WHERE id = ?",
        (state, now, state, reason, session_id),
    )


def _session(conn: sqlite3.Connection, session_id: str) -> Session | None:
    row = conn.execute(f"SELECT {SESSION_FIELDS} FROM sessions WHERE id = ?", (session_id,))
    found = row.fetchone()
    return Session(*found) if found else None


def _recent_turns(conn: sqlite3.Connection, session_id: str, turns: int) -> list[StoredMessage]:
    if turns <= 0:
        return []
    rows = conn.execute(
        "SELECT role, content, created_at, meta, turn FROM messages WHERE session_id = ? "
        "AND turn > (SELECT COALESCE(MAX(turn), 0) FROM messages WHERE session_id = ?) - ? "
        "ORDER BY id",
        (session_id, session_id, turns),
    ).fetchall()
    return [_message(row) for row in rows]


def _message(row: tuple[str, str, float, str, int]) -> StoredMessage:
    role, content, created_at, meta, turn = row
    return StoredMessage(role, content, created_at, json.loads(meta), turn)  # type: ignore[arg-type]
