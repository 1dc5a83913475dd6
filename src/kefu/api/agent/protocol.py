"""Wire models of the human-agent API: ``/agent/sessions``."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from kefu.api.chat.protocol import MemoryOut
from kefu.api.protocol import NoNul


class WaitingSessionOut(BaseModel):
    session_id: str
    # The summary and facts of the turns before the last few (--memory summary), if built.
    memory: MemoryOut | None = None
    user_id: str | None
    reason: str | None
    since: float | None
    waiting_seconds: float
    last_message: str | None
    # The agent answering it (a claim); None while nobody has taken it.
    claimed_by: str | None = None


class WaitingSessionsOut(BaseModel):
    sessions: list[WaitingSessionOut]


class AgentReplyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    message: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), *NoNul]
    agent: Annotated[str, StringConstraints(max_length=128), *NoNul] | None = None


class AgentReplyOut(BaseModel):
    session_id: str
    turn: int
    created_at: float
    delivered: int  # customer streams open when it was sent (it is stored either way)


AgentName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


class ClaimIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: AgentName


class ClaimOut(BaseModel):
    session_id: str
    agent: str
