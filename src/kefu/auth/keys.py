"""API keys: ``kefu_<id>_<secret>``, kept only as a SHA-256 hash.

The id finds the record; the hash of the whole key is compared in constant time,
so a lookup tells nothing about how much of a guessed secret was right. The key
itself is printed once, by ``kefu keys create``, and never stored or logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from kefu.sqlite_files import open_wal

PREFIX = "kefu_"
_DUMMY_HASH = hashlib.sha256(b"no such key").hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    name: str
    hash: str
    scopes: tuple[str, ...]
    rate_limit: str | None  # N/SECONDS, or None for the server's --rate-limit
    max_streams: int | None
    created_at: float
    revoked_at: float | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> ApiKey:
        data: dict[str, Any] = json.loads(text)
        data["scopes"] = tuple(data["scopes"])
        return cls(**data)


def new_key(
    name: str, scopes: tuple[str, ...], rate_limit: str | None, max_streams: int | None
) -> tuple[str, ApiKey]:
    """The key to hand out (once) and the record to store."""
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    record = ApiKey(key_id, name, _digest(key), scopes, rate_limit, max_streams, time.time())
    return key, record


def key_id(key: str) -> str | None:
    """The id part of something shaped like a key, else None."""
    if not key.startswith(PREFIX):
        return None
    found, sep, _ = key[len(PREFIX) :].partition("_")
    return found if sep and len(found) == 12 else None


def matches(key: str, record: ApiKey | None) -> bool:
    """Constant-time: an unknown id costs the same comparison as a wrong secret."""
    expected = record.hash if record is not None else _DUMMY_HASH
    return hmac.compare_digest(_digest(key), expected) and record is not None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore(Protocol):
    async def add(self, record: ApiKey) -> None: ...

    async def get(self, key_id: str) -> ApiKey | None: ...

    async def all(self) -> list[ApiKey]: ...

    async def revoke(self, key_id: str) -> bool:
        """False when there is no such key (or it was revoked before)."""
        ...

    async def secret(self) -> bytes:
        """The server's signing secret for web-page tokens, made on first use and shared
        by every replica that shares this store."""
        ...


class SqliteKeyStore:
    """Keys in ``keys.db`` in the data dir; each call opens the file on a worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        conn = open_wal(self.path)
        conn.executescript(
            "CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, record TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL);"
        )
        return conn

    async def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            conn = self._connect()
            try:
                with conn:
                    return conn.execute(sql, args).fetchall()
            finally:
                conn.close()

        return await asyncio.to_thread(run)

    async def add(self, record: ApiKey) -> None:
        await self._run("INSERT INTO api_keys VALUES (?, ?)", (record.id, record.to_json()))

    async def get(self, key_id: str) -> ApiKey | None:
        rows = await self._run("SELECT record FROM api_keys WHERE id = ?", (key_id,))
        return ApiKey.from_json(rows[0][0]) if rows else None

    async def all(self) -> list[ApiKey]:
        rows = await self._run("SELECT record FROM api_keys")
        return sorted((ApiKey.from_json(r[0]) for r in rows), key=lambda k: k.created_at)

    async def revoke(self, key_id: str) -> bool:
        record = await self.get(key_id)
        if record is None or record.revoked_at is not None:
            return False
        revoked = ApiKey(**{**asdict(record), "revoked_at": time.time()})
        await self._run("UPDATE api_keys SET record = ? WHERE id = ?", (revoked.to_json(), key_id))
        return True

    async def secret(self) -> bytes:
        await self._run(
            "INSERT OR IGNORE INTO secrets VALUES ('web', ?)", (secrets.token_bytes(32),)
        )
        rows = await self._run("SELECT value FROM secrets WHERE name = 'web'")
        return bytes(rows[0][0])
