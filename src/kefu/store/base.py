"""What a session store keeps and the interface every store (SQLite now, Redis later) offers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kefu.engine.base import ChatMessage, Role


@dataclass(frozen=True, slots=True)
class StoredMessage:
    role: Role
    content: str
    created_at: float
    # Per-message facts worth keeping: tier, finish_reason, timings of the reply.
    meta: dict[str, Any] = field(default_factory=dict)
    turn: int = 0  # 1 for the session's first exchange

    def as_chat(self) -> ChatMessage:
        return ChatMessage(self.role, self.content)


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    user_id: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class Turn:
    """One exchange, stored atomically once the reply is complete (or was cut short)."""

    user: str
    assistant: str
    meta: dict[str, Any] = field(default_factory=dict)


class SessionStore(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def get_session(self, session_id: str) -> Session | None: ...

    async def recent_turns(self, session_id: str, turns: int) -> list[StoredMessage]:
        """The messages of the last ``turns`` complete turns, oldest first."""
        ...

    async def messages(self, session_id: str) -> list[StoredMessage]: ...

    async def append_turn(self, session_id: str, turn: Turn, user_id: str | None = None) -> int:
        """Store a turn and return its number (1 for the first); the first creates the session."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """True if the session existed."""
        ...
