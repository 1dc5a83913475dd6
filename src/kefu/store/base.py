"""What a session store keeps and the interface every store (SQLite, Redis) offers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

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


SessionState = Literal["bot", "handoff"]


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    user_id: str | None
    created_at: float
    updated_at: float
    # "handoff": a human agent owns the conversation; the bot only acknowledges messages.
    state: SessionState = "bot"
    state_reason: str | None = None
    state_since: float | None = None
    # The authenticated caller who began it (key, JWT subject or web visitor); None
    # without auth. Nobody else sees it, except the admin scope (the agent desk).
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """One exchange, stored atomically once the reply is complete (or was cut short)."""

    user: str
    assistant: str
    meta: dict[str, Any] = field(default_factory=dict)
    # Moves the session to this state in the same transaction (a handoff is never lost).
    state: SessionState | None = None
    state_reason: str | None = None


@dataclass(frozen=True, slots=True)
class SessionMemory:
    """What a long conversation keeps of the turns that left the prompt."""

    summary: str = ""
    # Kept verbatim, by kind: "order_numbers", "sizes", "emails", "language", "opening".
    facts: dict[str, list[str]] = field(default_factory=dict)
    covered_turn: int = 0  # turns 1..covered_turn are in the summary and facts
    updated_at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "facts": self.facts,
            "covered_turn": self.covered_turn,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionMemory:
        return cls(
            summary=str(data.get("summary", "")),
            facts={str(k): [str(v) for v in vs] for k, vs in dict(data.get("facts", {})).items()},
            covered_turn=int(data.get("covered_turn", 0)),
            updated_at=float(data.get("updated_at", 0.0)),
        )


class SessionStore(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def get_session(self, session_id: str) -> Session | None: ...

    async def recent_turns(self, session_id: str, turns: int) -> list[StoredMessage]:
        """The messages of the last ``turns`` complete turns, oldest first."""
        ...

    async def resume(
        self, session_id: str, turns: int
    ) -> tuple[Session | None, list[StoredMessage]]:
        """``get_session`` and ``recent_turns`` in one trip: what a turn reads before
        it is routed."""
        ...

    async def messages(self, session_id: str) -> list[StoredMessage]: ...

    async def append_turn(
        self, session_id: str, turn: Turn, user_id: str | None = None, owner: str | None = None
    ) -> int:
        """Store a turn and return its number (1 for the first); the first creates the
        session, owned by ``owner``."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """True if the session existed."""
        ...

    async def append_message(
        self, session_id: str, content: str, meta: dict[str, Any]
    ) -> StoredMessage | None:
        """An assistant message outside a bot turn (a human agent's reply), filed under the
        session's last turn; None when there is no such session."""
        ...

    async def set_state(
        self, session_id: str, state: SessionState, reason: str | None = None
    ) -> Session | None:
        """None when there is no such session."""
        ...

    async def sessions_in_state(self, state: SessionState, limit: int = 100) -> list[Session]:
        """Oldest state change first: the customer who has waited longest comes first."""
        ...

    async def load_memory(self, session_id: str) -> SessionMemory | None:
        """The session's summary and facts; None when none was built yet."""
        ...

    async def save_memory(self, session_id: str, memory: SessionMemory) -> bool:
        """Replace the session's memory; False (nothing written) when the session is gone,
        so a summary finishing after a delete leaves nothing behind."""
        ...
