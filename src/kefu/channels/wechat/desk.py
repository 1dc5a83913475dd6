"""The channels' core: each message answered once, in the reply to WeChat's request when
the answer is ready within the budget, else through the API when it is.

Per request (``receive``): the ledger records the arrival; the first one starts the
answer in a task of its own (WeChat may drop the request at 5 s; the answer goes on);
every request for the message, a retry on another replica included, then waits until its
deadline for the answer and takes it passively if it is ready and short enough for one
reply. The task that made the answer sends it through the API once no request waits for
it any more (``success`` already went back). The sweeper, on every replica, takes over
what a dead replica left: an answer half made (made again, or read back from the session
if the dead replica stored it), an answer made but not sent, a send cut short.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

from kefu.channels.wechat.answers import Answers
from kefu.channels.wechat.inbound import Inbound
from kefu.channels.wechat.ledger import Entry, Ledger
from kefu.channels.wechat.split import split_text
from kefu.errors import ChannelError, KefuError, StateUnavailable
from kefu.service.runtime import Runtime

log = logging.getLogger("kefu.wechat")

# A replica that makes or sends an answer renews its lease at a third of this; when it
# dies, another takes over within a lease and a sweep.
LEASE_SECONDS = 3.0
SWEEP_SECONDS = 1.0
# A send WeChat failed (not for good) is tried again after this long, until the ledger
# forgets the message.
RESEND_SECONDS = 5.0
ASYNC_BUCKETS = (0.5, 1, 2, 3, 4, 5, 7.5, 10, 15, 20, 30, 45, 60, 120, 300)


class Outbox(Protocol):
    """Where answers go when the reply to WeChat's request has gone: the platform's API."""

    async def send(self, user: str, text: str, *, key: str, part: int, code: str = "") -> None:
        """One message to ``user``; ``key`` and ``part`` name it (an API that takes an id
        de-duplicates resends); ``code``: the event's own reply code (微信客服's welcome).
        ChannelError when it was not sent."""
        ...


class DeskMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.messages = Counter(
            "kefu_wechat_messages",
            "WeChat messages by how their answer went out: passive (in the reply to WeChat's "
            "request), async (the API, later), failed (WeChat refused it for good).",
            ["channel", "delivery"],
            registry=registry,
        )
        self.requests = Counter(
            "kefu_wechat_requests",
            "WeChat's requests by what they were: first (a new message) or retry.",
            ["channel", "kind"],
            registry=registry,
        )
        self.takeovers = Counter(
            "kefu_wechat_takeovers",
            "Messages a replica took over from one whose lease ran out (it died).",
            ["channel", "stage"],
            registry=registry,
        )
        self.sends = Counter(
            "kefu_wechat_sends",
            "Messages sent through WeChat's API, by result.",
            ["channel", "result"],
            registry=registry,
        )
        self.async_seconds = Histogram(
            "kefu_wechat_async_seconds",
            "First request for a message to its answer sent through the API.",
            ["channel"],
            buckets=ASYNC_BUCKETS,
            registry=registry,
        )
        self.token_refreshes = Counter(
            "kefu_wechat_token_refreshes",
            "Access tokens this replica fetched from WeChat.",
            ["channel"],
            registry=registry,
        )


class Desk:
    def __init__(
        self,
        *,
        channel: str,
        runtime: Runtime,
        ledger: Ledger,
        answers: Answers,
        outbox: Outbox,
        metrics: DeskMetrics,
        lease: float = LEASE_SECONDS,
    ) -> None:
        self.channel = channel
        self.runtime = runtime
        self.ledger = ledger
        self.answers = answers
        self.outbox = outbox
        self.metrics = metrics
        self.lease = lease
        self.replica = uuid.uuid4().hex[:12]
        # Keys this replica is working on: the sweeper leaves them alone.
        self._working: set[str] = set()

    async def receive(self, message: Inbound, deadline: float | None) -> str | None:
        """The text to reply passively, or None: reply ``success`` (the answer goes, or
        went, through the API). ``deadline``: perf_counter time the reply must leave by;
        None where the platform has no passive reply (微信客服): the API sends all."""
        want = 0.0 if deadline is None else max(0.0, deadline - time.perf_counter())
        entry, created = await self.ledger.arrive(message, self.replica, self.lease, want)
        self.metrics.requests.labels(self.channel, "first" if created else "retry").inc()
        if created:
            self._start(message, resumed=False)
        if deadline is None:
            return None
        return await self._passive(message, entry, deadline)

    async def _passive(self, message: Inbound, entry: Entry | None, deadline: float) -> str | None:
        key = message.key
        while entry is not None:
            if entry.state == "passive":  # a retry: the reply that carried it never arrived
                return entry.parts[0] if entry.parts else None
            if entry.state == "ready":
                # Several messages go out through the API, in order; and a reply past the
                # deadline would reach WeChat after it gave up on this request.
                if len(entry.parts) != 1 or time.perf_counter() > deadline:
                    return None
                entry, moved = await self.ledger.deliver(key, "passive", self.replica, 0)
                if moved:
                    self.metrics.messages.labels(self.channel, "passive").inc()
                    return entry.parts[0] if entry is not None else None
                continue
            if entry.state != "working":
                return None  # sending, sent, failed: nothing to reply
            if entry.expired and key not in self._working:
                taken = await self.ledger.take_over(key, self.replica, self.lease)
                if taken is not None:
                    self.metrics.takeovers.labels(self.channel, "answer").inc()
                    self._start(message, resumed=True)
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            await self.ledger.changed(key, left)
            entry = await self.ledger.get(key)
        return None

    def _start(self, message: Inbound, resumed: bool) -> None:
        self._track(message.key, self._work(message, resumed))

    def _track(self, key: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on ``key`` in the background; the sweeper leaves the key alone."""
        self._working.add(key)
        task = self.runtime.spawn(work)
        task.add_done_callback(lambda _: self._working.discard(key))

    async def _work(self, message: Inbound, resumed: bool) -> None:
        """Make the answer under a lease, then deliver it unless a request takes it."""
        key = message.key
        renewing = asyncio.create_task(self._keep_lease(key))
        try:
            text = await self.answers.answer(message, resumed=resumed)
        finally:
            renewing.cancel()
            with suppress(asyncio.CancelledError):
                await renewing
        parts = split_text(text) or [text]
        if not await self.ledger.finish(key, self.replica, parts):
            return  # our lease ran out and another replica took the message over
        await self._send_when_unwanted(key)

    async def _keep_lease(self, key: str) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            with suppress(StateUnavailable):
                await self.ledger.renew(key, self.replica, self.lease)

    async def _send_when_unwanted(self, key: str) -> None:
        """Leave a ready answer to the request waiting for it; send it once none does."""
        while True:
            entry, moved = await self.ledger.deliver(key, "sending", self.replica, self.lease)
            if moved and entry is not None:
                await self._send(entry)
                return
            if entry is None or entry.state != "ready":
                return  # a request took it passively
            await self.ledger.changed(key, max(0.01, entry.wanted_left))

    async def _send(self, entry: Entry) -> None:
        key, message = entry.message.key, entry.message
        sent = entry.sent
        try:
            for part in entry.parts[sent:]:
                code = message.detail if sent == 0 else ""
                await self.outbox.send(message.user, part, key=key, part=sent, code=code)
                sent += 1
                await self.ledger.progress(key, self.replica, sent, self.lease)
                self.metrics.sends.labels(self.channel, "ok").inc()
        except ChannelError as exc:
            self.metrics.sends.labels(self.channel, "refused" if exc.permanent else "failed").inc()
            if exc.permanent:
                log.error("WeChat refused the answer to %s for good: %s", key, exc.message)
                await self.ledger.progress(key, self.replica, sent, 0, failed=True)
                self.metrics.messages.labels(self.channel, "failed").inc()
            else:
                # The sweeper tries again once this short lease ends.
                log.warning("sending the answer to %s failed (%s); retrying", key, exc.message)
                await self.ledger.progress(key, self.replica, sent, RESEND_SECONDS)
            return
        self.metrics.messages.labels(self.channel, "async").inc()
        self.metrics.async_seconds.labels(self.channel).observe(
            max(0.0, time.time() - entry.received_at)
        )

    async def relay(self, user: str, text: str) -> None:
        """A human agent's reply, sent through the API (ChannelError if it was not)."""
        key = f"{self.channel}:agent:{uuid.uuid4().hex}"
        for part, chunk in enumerate(split_text(text)):
            await self.outbox.send(user, chunk, key=key, part=part)
            self.metrics.sends.labels(self.channel, "ok").inc()

    async def sweep_forever(self, every: float = SWEEP_SECONDS) -> None:
        while True:
            try:
                await self.sweep()
            except KefuError as exc:
                log.warning("WeChat sweep failed: %s", exc.message)
            except Exception:
                log.exception("WeChat sweep failed")
            await asyncio.sleep(every)

    async def sweep(self) -> None:
        """Take over what a dead replica left."""
        for key in await self.ledger.due():
            if key in self._working:
                continue
            entry = await self.ledger.take_over(key, self.replica, self.lease)
            if entry is None:
                continue
            if entry.state == "working":
                self.metrics.takeovers.labels(self.channel, "answer").inc()
                self._start(entry.message, resumed=True)
            elif entry.state == "sending":
                self.metrics.takeovers.labels(self.channel, "send").inc()
                self._track(key, self._send(entry))
