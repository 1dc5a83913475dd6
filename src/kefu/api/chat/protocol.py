"""Wire models of the customer-service API: ``POST /chat`` and the session resources."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from kefu.api.protocol import NoNul
from kefu.service.busy import TurnBusy
from kefu.store.base import SessionMemory

SessionId = Annotated[str, StringConstraints(min_length=1, max_length=128), *NoNul]


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    message: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), *NoNul]
    session_id: SessionId | None = None
    user_id: Annotated[str, StringConstraints(max_length=256), *NoNul] | None = None
    # Cached answers are shared within a tenant only (one kefu serving several shops).
    tenant: Annotated[str, StringConstraints(min_length=1, max_length=128), *NoNul] = "default"


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


# The events of ``POST /chat``'s stream (``event: NAME`` / ``data: JSON``), in order:
# meta, token..., then done, or handoff then done, or error.


class MetaEvent(BaseModel):
    """First: the session this turn belongs to (a new one when none was given)."""

    session_id: str


class TokenEvent(BaseModel):
    """A piece of the reply, whole UTF-8 characters."""

    text: str


class HandoffEvent(BaseModel):
    """The session now waits for a human; their replies arrive on ``events``."""

    session_id: str
    reason: str | None
    agents_available: bool
    service_hours: str
    events: str


class UsageOut(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    total_tokens: int


class RouteOut(BaseModel):
    intent: str
    confidence: float
    margin: float
    reason: str | None


class SourceOut(BaseModel):
    kind: str
    id: str
    question: str


class DoneEvent(BaseModel):
    """Last: the whole reply, how it was answered (tier), usage and stage timings (ms)."""

    session_id: str
    reply: str
    tier: str
    route: RouteOut | None
    source: SourceOut | None
    usage: UsageOut
    timings: dict[str, float]
    routed: dict[str, str | int] | None = None


# The events of ``GET /sessions/{session_id}/events``, the customer's live stream.


class AgentEvent(BaseModel):
    """A human agent's reply."""

    text: str
    agent: str | None
    created_at: float


class StateEvent(BaseModel):
    """The session changed hands: ``handoff`` (to a human) or ``bot``."""

    state: str
    reason: str | None


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
