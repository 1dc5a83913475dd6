"""Wire models of the customer-service API: ``POST /chat`` and the session resources."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from kefu.service.busy import TurnBusy
from kefu.store.base import SessionMemory

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


class MemoryOut(BaseModel):
    """The rolling summary and the facts of the turns it covers (--memory summary)."""

    summary: str
    facts: dict[str, list[str]]
    covered_turn: int
    updated_at: float

    @classmethod
    def of(cls, memory: SessionMemory | None) -> MemoryOut | None:
        return None if memory is None else cls(**memory.as_dict())


class SessionOut(BaseModel):
    session_id: str
    user_id: str | None
    created_at: float
    updated_at: float
    state: str
    state_reason: str | None
    state_since: float | None
    # Before the messages: what a human picking the conversation up reads first.
    memory: MemoryOut | None = None
    messages: list[MessageOut]


class SuggestionOut(BaseModel):
    id: str
    question: str
    answer: str


class HandoffOffer(BaseModel):
    agents_available: bool
    service_hours: str


class BusyOut(BaseModel):
    """The ``busy`` event (status 503, ``Retry-After``): what the page shows, and the
    refusal as the OpenAI envelope's ``error`` object for clients that read only that."""

    session_id: str | None
    message: str
    retry_after: int
    suggestions: list[SuggestionOut]
    handoff: HandoffOffer
    error: dict[str, Any]

    @classmethod
    def of(cls, event: TurnBusy) -> BusyOut:
        return cls(
            session_id=event.session_id,
            message=event.message,
            retry_after=event.retry_after,
            suggestions=[
                SuggestionOut(id=s.id, question=s.question, answer=s.answer)
                for s in event.suggestions
            ],
            handoff=HandoffOffer(
                agents_available=event.agents_available, service_hours=event.service_hours
            ),
            error={
                "message": event.reason,
                "type": "service_unavailable_error",
                "param": None,
                "code": event.code,
            },
        )
