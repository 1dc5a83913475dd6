"""Wire models of the customer-service API: ``POST /chat`` and the session resources."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

SessionId = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    session_id: SessionId | None = None
    user_id: Annotated[str, StringConstraints(max_length=256)] | None = None
    # Cached answers are shared within a tenant only (one kefu serving several shops).
    tenant: Annotated[str, StringConstraints(min_length=1, max_length=128)] = "default"


class MessageOut(BaseModel):
    role: str
    content: str
    created_at: float
    turn: int
    meta: dict[str, Any] = Field(default_factory=dict)


class SessionOut(BaseModel):
    session_id: str
    user_id: str | None
    created_at: float
    updated_at: float
    state: str
    state_reason: str | None
    state_since: float | None
    messages: list[MessageOut]
