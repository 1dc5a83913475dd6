"""Each WeChat message answered once: a ledger entry per message, shared by every request
WeChat makes for it (its three tries) and by every replica (``redis_ledger.py``).

An entry moves ``working`` (a replica makes the answer, under a lease it renews) ->
``ready`` (the answer is made) -> ``passive`` (it went back in the reply to one of WeChat's
requests) or ``sending`` (a replica sends it through the customer-service API, under a
lease) -> ``sent``; ``failed`` when WeChat refused it for good. Each move is one atomic
step, so of a request waiting to reply passively and the replica that made the answer
exactly one delivers it. A lease that runs out (its replica died) lets another take the
work over; ``due`` lists those for the sweeper.

A request that finds ``passive`` is a retry: WeChat retries only when no reply reached
it within 5 s, so the earlier reply was lost and this one carries the same answer again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from kefu.channels.wechat.inbound import Inbound

State = Literal["working", "ready", "passive", "sending", "sent", "failed"]
FINAL: frozenset[str] = frozenset({"passive", "sent", "failed"})
# How long a message is remembered: WeChat retries within 15 s, and a request signed more
# than this long ago is refused (envelope.REPLAY_WINDOW), so no replay outlives its entry.
KEEP_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class Entry:
    state: State
    owner: str
    message: Inbound
    parts: tuple[str, ...] = ()
    sent: int = 0  # parts sent through the API so far
    attempts: int = 1  # requests WeChat made for the message
    lease_left: float = 0.0  # seconds the owner's lease still runs (working, sending)
    wanted_left: float = 0.0  # seconds a request still waits to reply passively
    received_at: float = 0.0  # wall clock of the first request

    @property
    def expired(self) -> bool:
        return self.state in ("working", "sending") and self.lease_left <= 0

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Entry:
        """The JSON both ledgers keep (Lua's cjson writes an empty list as {})."""
        now = float(data["t"])
        parts = data.get("p") or []
        return cls(
            state=data["s"],
            owner=str(data["o"]),
            message=Inbound.from_dict(data["m"]),
            parts=tuple(str(p) for p in parts),
            sent=int(data.get("n", 0)),
            attempts=int(data.get("a", 1)),
            lease_left=(float(data.get("l", 0)) - now) / 1000,
            wanted_left=(float(data.get("w", 0)) - now) / 1000,
            received_at=float(data.get("r", 0)) / 1000,
        )


class Ledger(Protocol):
    async def arrive(
        self, message: Inbound, owner: str, lease: float, want: float
    ) -> tuple[Entry, bool]:
        """A request for ``message``: its entry, created ``working`` for ``owner`` if it was
        new (True); the request waits ``want`` seconds to reply passively either way."""
        ...

    async def get(self, key: str) -> Entry | None: ...

    async def take_over(self, key: str, owner: str, lease: float) -> Entry | None:
        """A ``working`` or ``sending`` entry whose lease ran out becomes ``owner``'s; a
        ``ready`` one nobody waits for any more becomes ``sending`` by ``owner``."""
        ...

    async def renew(self, key: str, owner: str, lease: float) -> bool: ...

    async def finish(self, key: str, owner: str, parts: list[str]) -> bool:
        """``working`` by ``owner`` -> ``ready`` with the answer; False if another took it."""
        ...

    async def deliver(
        self, key: str, how: Literal["passive", "sending"], owner: str, lease: float
    ) -> tuple[Entry | None, bool]:
        """``ready`` -> ``passive``, or -> ``sending`` once no request waits to reply
        passively; the entry as it is now, and whether this call moved it."""
        ...

    async def progress(
        self, key: str, owner: str, sent: int, lease: float, failed: bool = False
    ) -> None:
        """``sending`` by ``owner``: ``sent`` parts are out (all: ``sent``); ``failed``: the
        rest cannot be sent; a lease of 0 lets the sweeper try again later."""
        ...

    async def due(self, limit: int = 100) -> list[str]:
        """Keys whose lease ran out or whose passive wait ended before delivery."""
        ...

    async def changed(self, key: str, within: float) -> None:
        """Wait until the entry may have changed (at most ``within`` seconds)."""
        ...

    async def close(self) -> None: ...


@dataclass
class _Record:
    state: State
    owner: str
    message: Inbound
    lease_until: float
    wanted_until: float
    received_at: float
    parts: list[str] = field(default_factory=list)
    sent: int = 0
    attempts: int = 1
    forget_at: float = 0.0


class LocalLedger:
    """One process's ledger: right without --redis, where one replica answers all."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._records: dict[str, _Record] = {}
        self._changed: dict[str, asyncio.Event] = {}

    def _entry(self, record: _Record) -> Entry:
        now = self.clock()
        return Entry(
            state=record.state,
            owner=record.owner,
            message=record.message,
            parts=tuple(record.parts),
            sent=record.sent,
            attempts=record.attempts,
            lease_left=record.lease_until - now,
            wanted_left=record.wanted_until - now,
            received_at=record.received_at,
        )

    def _touch(self, key: str) -> None:
        event = self._changed.pop(key, None)
        if event is not None:
            event.set()

    def _forget_old(self, now: float) -> None:
        if len(self._records) % 256 == 0:
            for key in [k for k, r in self._records.items() if r.forget_at <= now]:
                del self._records[key]

    async def arrive(
        self, message: Inbound, owner: str, lease: float, want: float
    ) -> tuple[Entry, bool]:
        now = self.clock()
        record = self._records.get(message.key)
        created = record is None or record.forget_at <= now
        if created:
            self._forget_old(now)
            record = _Record(
                "working", owner, message, now + lease, now + want, time.time(),
                forget_at=now + KEEP_SECONDS,
            )  # fmt: skip
            self._records[message.key] = record
        else:
            assert record is not None
            record.attempts += 1
            record.wanted_until = max(record.wanted_until, now + want)
        return self._entry(record), created

    def _live(self, key: str) -> _Record | None:
        record = self._records.get(key)
        return record if record is not None and record.forget_at > self.clock() else None

    async def get(self, key: str) -> Entry | None:
        record = self._live(key)
        return self._entry(record) if record is not None else None

    async def take_over(self, key: str, owner: str, lease: float) -> Entry | None:
        record = self._live(key)
        now = self.clock()
        if record is None:
            return None
        if record.state in ("working", "sending") and record.lease_until <= now:
            record.owner, record.lease_until = owner, now + lease
        elif record.state == "ready" and record.wanted_until <= now:
            record.state, record.owner, record.lease_until = "sending", owner, now + lease
        else:
            return None
        self._touch(key)
        return self._entry(record)

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        record = self._live(key)
        if record is None or record.owner != owner or record.state not in ("working", "sending"):
            return False
        record.lease_until = self.clock() + lease
        return True

    async def finish(self, key: str, owner: str, parts: list[str]) -> bool:
        record = self._live(key)
        if record is None or record.state != "working" or record.owner != owner:
            return False
        record.state, record.parts = "ready", list(parts)
        self._touch(key)
        return True

    async def deliver(
        self, key: str, how: Literal["passive", "sending"], owner: str, lease: float
    ) -> tuple[Entry | None, bool]:
        record = self._live(key)
        if record is None:
            return None, False
        now = self.clock()
        moved = record.state == "ready" and (how == "passive" or record.wanted_until <= now)
        if moved:
            record.state = how
            if how == "sending":
                record.owner, record.lease_until = owner, now + lease
            self._touch(key)
        return self._entry(record), moved

    async def progress(
        self, key: str, owner: str, sent: int, lease: float, failed: bool = False
    ) -> None:
        record = self._live(key)
        if record is None or record.state != "sending" or record.owner != owner:
            return
        record.sent = sent
        record.lease_until = self.clock() + lease
        if failed:
            record.state = "failed"
        elif sent >= len(record.parts):
            record.state = "sent"
        self._touch(key)

    async def due(self, limit: int = 100) -> list[str]:
        now = self.clock()
        found = []
        for key, record in self._records.items():
            if record.forget_at <= now or record.state in FINAL:
                continue
            if (record.state in ("working", "sending") and record.lease_until <= now) or (
                record.state == "ready" and record.wanted_until <= now
            ):
                found.append(key)
                if len(found) >= limit:
                    break
        return found

    async def changed(self, key: str, within: float) -> None:
        event = self._changed.setdefault(key, asyncio.Event())
        try:
            async with asyncio.timeout(max(0.0, within)):
                await event.wait()
        except TimeoutError:
            pass

    async def close(self) -> None:
        return None
