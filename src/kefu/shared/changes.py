"""Knowledge-base changes and cached answers made on one replica reach every replica.

Each replica keeps its knowledge base and answer cache in its own --data-dir and
memory: they are read on every message, in microseconds, and a Redis round trip
there would cost more than the lookup. What Redis carries is the news: a change made
through ``/kb``, or an answer the cache took, is appended to a stream, and every
replica's follower (the loop that already picks up file changes every two seconds)
applies the others' news to its own copy, so a change is everywhere within that
round. A replica that starts replays the streams, catching up with what happened
before it came (the last STREAM_LENGTH entries of each). Redis down: each replica
keeps serving from its own copy; what happened meanwhile stays where it happened.
``kefu kb`` and ``kefu cache`` on a data dir's files stay local to it.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, Protocol

import numpy as np

from kefu.errors import StateUnavailable
from kefu.knowledge.base import KbChange, KnowledgeBase
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry
from kefu.shared.client import RedisClient

KB_STREAM = "kefu:kb:changes"
CACHE_STREAM = "kefu:cache:answers"
STREAM_LENGTH = 10_000
READ_BATCH = 200
log = logging.getLogger("kefu.redis")


class LocalCopy(Protocol):
    """This replica's knowledge base and answer cache, where the other replicas' news goes:
    service/'s FastPath, described here by what it does because service/ is above shared/."""

    async def import_entries(self, entries: Sequence[KbEntry]) -> object: ...

    async def change_kb(self, change: Callable[[KnowledgeBase], KbChange]) -> object: ...

    async def remember(
        self, scope: str, message: str, reply: str, vector: Vectors, sources: Sequence[str]
    ) -> object: ...


class SharedChanges:
    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self.origin = uuid.uuid4().hex  # this process: it skips its own news
        self._last = {KB_STREAM: "0", CACHE_STREAM: "0"}

    async def kb_added(self, entries: Sequence[KbEntry]) -> None:
        if entries:
            await self._append(KB_STREAM, "add", [asdict(entry) for entry in entries])

    async def kb_removed(self, ids: Sequence[str]) -> None:
        if ids:
            await self._append(KB_STREAM, "remove", list(ids))

    async def answer_cached(
        self, scope: str, question: str, answer: str, vector: Vectors, sources: Sequence[str]
    ) -> None:
        row = np.asarray(vector, dtype=np.float32)
        data = {
            "scope": scope,
            "question": question,
            "answer": answer,
            "vector": base64.b64encode(row.tobytes()).decode(),
            "sources": list(sources),
        }
        await self._append(CACHE_STREAM, "put", data)

    async def _append(self, stream: str, op: str, data: Any) -> None:
        fields: dict[Any, Any] = {"origin": self.origin, "op": op, "data": json.dumps(data)}
        try:
            await self.client.call(
                "changes.publish",
                lambda r: r.xadd(stream, fields, maxlen=STREAM_LENGTH, approximate=True),
            )
        except StateUnavailable:
            log.error("a %s could not reach the other replicas (Redis down)", stream)

    async def follow(self, fast_path: LocalCopy) -> int:
        """Apply the other replicas' news since the last round; returns how much."""
        streams: dict[Any, Any] = dict(self._last)
        replies: Any = await self.client.call(
            "changes.follow", lambda r: r.xread(streams, count=READ_BATCH)
        )
        applied = 0
        for raw_stream, items in replies or []:
            stream = raw_stream.decode()
            for stream_id, fields in items:
                self._last[stream] = stream_id.decode()
                if fields[b"origin"].decode() == self.origin:
                    continue
                await _apply(fast_path, fields[b"op"].decode(), json.loads(fields[b"data"]))
                applied += 1
        return applied


async def _apply(fast_path: LocalCopy, op: str, data: Any) -> None:
    if op == "add":
        await fast_path.import_entries([KbEntry(**entry) for entry in data])
    elif op == "remove":

        def remove(kb: KnowledgeBase) -> KbChange:
            return kb.remove([i for i in data if kb.get(i) is not None])

        await fast_path.change_kb(remove)  # what is gone here already is skipped
    elif op == "put":
        vector = np.frombuffer(base64.b64decode(data["vector"]), dtype=np.float32)
        await fast_path.remember(
            data["scope"], data["question"], data["answer"], vector, data["sources"]
        )
