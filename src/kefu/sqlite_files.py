"""How kefu opens every SQLite file it keeps (sessions, knowledge, cache, demo orders).

WAL with synchronous=NORMAL: readers never block the writer and a commit does not
fsync; a power cut may lose the last commits but never corrupts the file. The busy
timeout lets the ``kefu kb`` / ``kefu cache`` commands write while a server reads.
Each connection is used by one thread at a time; check_same_thread is off because
it is opened on one thread and used on a worker.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

BUSY_TIMEOUT_MS = 5000


def open_wal(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn
