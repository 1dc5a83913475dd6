"""Which human agent is answering a handed-off conversation: a claim, so two agents never
answer one customer. In process here; ``shared/claims.py`` keeps them in Redis (--redis).

A claim is a lease: an agent who takes a conversation and walks away does not lock it for
ever. Every reply renews it; handing the conversation back ends it.
"""

from __future__ import annotations

import time
from typing import Protocol

CLAIM_SECONDS = 15 * 60.0


class Claims(Protocol):
    async def take(self, session_id: str, agent: str) -> str:
        """Claim the conversation for ``agent`` unless another holds it; returns the holder
        (``agent`` itself when taken or renewed)."""
        ...

    async def holders(self, session_ids: list[str]) -> dict[str, str]:
        """The current holder of each claimed conversation among ``session_ids``."""
        ...

    async def drop(self, session_id: str) -> None: ...


class LocalClaims:
    def __init__(self, seconds: float = CLAIM_SECONDS) -> None:
        self.seconds = seconds
        self._held: dict[str, tuple[str, float]] = {}

    def _holder(self, session_id: str, now: float) -> str | None:
        held = self._held.get(session_id)
        if held is None:
            return None
        if held[1] <= now:
            del self._held[session_id]
            return None
        return held[0]

    async def take(self, session_id: str, agent: str) -> str:
        now = time.monotonic()
        holder = self._holder(session_id, now)
        if holder is None or holder == agent:
            self._held[session_id] = (agent, now + self.seconds)
            return agent
        return holder

    async def holders(self, session_ids: list[str]) -> dict[str, str]:
        now = time.monotonic()
        found = {sid: self._holder(sid, now) for sid in session_ids}
        return {sid: holder for sid, holder in found.items() if holder is not None}

    async def drop(self, session_id: str) -> None:
        self._held.pop(session_id, None)
