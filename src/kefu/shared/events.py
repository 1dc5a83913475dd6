"""Live session events across replicas: Redis pub/sub, one channel per session.

A replica subscribes to a session's channel while it has a stream of that session
open, so an agent's reply posted to replica A reaches the customer's stream on
replica B. One PubSub connection per process carries every channel; a listener
task hands what arrives to the local streams. When Redis drops, the listener
opens a new connection and subscribes this process's channels again; events
published meanwhile are missed, but never the message: it is in the session store.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from redis.exceptions import RedisError

from kefu.errors import StateUnavailable
from kefu.sessions.events import SessionEvent, SessionEvents
from kefu.shared.client import RedisClient

log = logging.getLogger("kefu.redis")
PREFIX = "kefu:events:"


class RedisSessionEvents(SessionEvents):
    def __init__(self, client: RedisClient) -> None:
        super().__init__()
        self.client = client
        self._pubsub = client.redis.pubsub(ignore_subscribe_messages=True)
        self._listener: asyncio.Task[None] | None = None

    async def publish(self, session_id: str, event: SessionEvent) -> int:
        payload = json.dumps({"name": event.name, "data": event.data})
        receivers = await self.client.call(
            "events.publish", lambda r: r.publish(PREFIX + session_id, payload)
        )
        return int(receivers)

    @asynccontextmanager
    async def subscribe(self, session_id: str) -> AsyncIterator[asyncio.Queue[SessionEvent]]:
        first = session_id not in self._subscribers
        async with super().subscribe(session_id) as queue:
            if first:
                channel = PREFIX + session_id
                await self.client.call(
                    "events.subscribe", lambda r: self._pubsub.subscribe(channel)
                )
                if self._listener is None:
                    self._listener = asyncio.create_task(self._listen())
            try:
                yield queue
            finally:
                if len(self._subscribers.get(session_id, ())) == 1:  # the last stream leaves
                    with suppress(Exception):
                        await self.client.call(
                            "events.unsubscribe",
                            lambda r: self._pubsub.unsubscribe(PREFIX + session_id),
                        )

    async def _listen(self) -> None:
        broken = False
        while True:
            try:
                if broken:
                    await self._resubscribe()
                    broken = False
                    log.warning("session events from Redis flow again")
                message = await self._pubsub.get_message(timeout=1.0)
            except (RedisError, OSError, StateUnavailable) as exc:
                if not broken:
                    log.error("session events from Redis interrupted (%s)", type(exc).__name__)
                broken = True
                await asyncio.sleep(0.5)
                continue
            if message is None or message.get("type") != "message":
                if not self._pubsub.subscribed:
                    await asyncio.sleep(0.05)
                continue
            session_id = message["channel"].decode().removeprefix(PREFIX)
            data = json.loads(message["data"])
            self.deliver(session_id, SessionEvent(data["name"], data["data"]))

    async def _resubscribe(self) -> None:
        """A new PubSub connection with this process's channels: the old one is dead."""
        old, self._pubsub = self._pubsub, self.client.redis.pubsub(ignore_subscribe_messages=True)
        with suppress(Exception):
            await old.aclose()
        channels = [PREFIX + session_id for session_id in self._subscribers]
        if channels:
            await self.client.call("events.subscribe", lambda r: self._pubsub.subscribe(*channels))

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with suppress(asyncio.CancelledError):
                await self._listener
        await self._pubsub.aclose()
