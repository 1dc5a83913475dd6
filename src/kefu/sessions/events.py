"""Live events of a session for the customer's open stream (``GET /sessions/{id}/events``).

A human agent's reply reaches the customer through here, pushed the moment it
is stored. The message itself is in the session store, so a customer who was
not connected reads it from ``GET /sessions/{id}``: the hub only carries news,
and a subscriber too slow to keep up loses the oldest event, never the message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

QUEUE_SIZE = 64


@dataclass(frozen=True, slots=True)
class SessionEvent:
    name: str  # the SSE event name: "agent", "state"
    data: dict[str, Any]


@dataclass
class SessionEvents:
    _subscribers: dict[str, set[asyncio.Queue[SessionEvent]]] = field(default_factory=dict)

    async def publish(self, session_id: str, event: SessionEvent) -> int:
        """Deliver to every open stream of the session; returns how many received it
        (with Redis: how many replicas have a stream of it open)."""
        return self.deliver(session_id, event)

    def deliver(self, session_id: str, event: SessionEvent) -> int:
        """Deliver to this process's open streams of the session."""
        queues = self._subscribers.get(session_id, set())
        for queue in queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)
        return len(queues)

    @asynccontextmanager
    async def subscribe(self, session_id: str) -> AsyncIterator[asyncio.Queue[SessionEvent]]:
        queue: asyncio.Queue[SessionEvent] = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.setdefault(session_id, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self._subscribers.get(session_id)
            if queues is not None:
                queues.discard(queue)
                if not queues:
                    del self._subscribers[session_id]
