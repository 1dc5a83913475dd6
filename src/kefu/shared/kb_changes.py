"""Knowledge-base changes made through any replica's HTTP API reach every replica.

Each replica keeps its knowledge base in its own --data-dir (it is read on every
message, so it stays local and in memory). A change made through ``/kb`` is applied
locally and appended to a Redis stream; every replica's follower (the loop that
already picks up file changes every two seconds) applies the others' changes to its
own copy, so they are everywhere within that round. A replica that starts replays the
stream, so it catches up with what was changed before it came. The stream keeps the
last STREAM_LENGTH changes; ``kefu kb`` on a data dir's files stays local to it.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import asdict
from typing import Any

from kefu.errors import StateUnavailable
from kefu.knowledge.base import KbChange, KnowledgeBase
from kefu.knowledge.entries import KbEntry
from kefu.service.fast_path import FastPath
from kefu.shared.client import RedisClient

STREAM = "kefu:kb:changes"
STREAM_LENGTH = 10_000
READ_BATCH = 100
log = logging.getLogger("kefu.redis")


class KbChanges:
    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self.origin = uuid.uuid4().hex  # this process: it skips its own changes
        self._last = "0"

    async def added(self, entries: list[KbEntry]) -> None:
        await self._append("add", [asdict(entry) for entry in entries])

    async def removed(self, ids: list[str]) -> None:
        await self._append("remove", ids)

    async def _append(self, op: str, data: list[Any]) -> None:
        fields: dict[Any, Any] = {"origin": self.origin, "op": op, "data": json.dumps(data)}
        try:
            await self.client.call(
                "kb.publish",
                lambda r: r.xadd(STREAM, fields, maxlen=STREAM_LENGTH, approximate=True),
            )
        except StateUnavailable:
            # Applied here already; the others get it when it is made again. Said loudly.
            log.error("a knowledge-base change could not reach the other replicas (Redis down)")

    async def follow(self, fast_path: FastPath) -> int:
        """Apply the other replicas' changes since the last round; returns how many."""
        last = self._last
        replies: Any = await self.client.call(
            "kb.follow", lambda r: r.xread({STREAM: last}, count=READ_BATCH)
        )
        applied = 0
        for _, items in replies or []:
            for stream_id, fields in items:
                self._last = stream_id.decode()
                if fields[b"origin"].decode() == self.origin:
                    continue
                await _apply(fast_path, fields[b"op"].decode(), json.loads(fields[b"data"]))
                applied += 1
        return applied


async def _apply(fast_path: FastPath, op: str, data: list[Any]) -> None:
    if op == "add":
        await fast_path.import_entries([KbEntry(**entry) for entry in data])
    elif op == "remove":

        def remove(kb: KnowledgeBase) -> KbChange:
            return kb.remove([i for i in data if kb.get(i) is not None])

        await fast_path.change_kb(remove)  # what is gone here already is skipped
