"""What a turn yields, and how its routing and source are written (in a `done` event and in
a stored turn's meta alike)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kefu.engine.base import Usage
from kefu.fastpath.router import Routing
from kefu.service.busy import TurnBusy
from kefu.service.plan import Source, Tier


@dataclass(frozen=True, slots=True)
class TurnStarted:
    session_id: str


@dataclass(frozen=True, slots=True)
class TurnToken:
    text: str


@dataclass(frozen=True, slots=True)
class TurnHandoff:
    """The session now waits for a human; their replies arrive on the session's events."""

    session_id: str
    reason: str | None
    agents_available: bool
    service_hours: str


@dataclass(frozen=True, slots=True)
class TurnDone:
    session_id: str
    reply: str
    tier: Tier
    usage: Usage
    timings: dict[str, float] = field(default_factory=dict)
    routing: Routing | None = None
    source: Source | None = None
    # Which remote engine answered and why (a pool of engines only).
    routed: dict[str, str | int] | None = None


TurnEvent = TurnStarted | TurnToken | TurnHandoff | TurnDone | TurnBusy


def routing_dict(routing: Routing) -> dict[str, Any]:
    return {
        "intent": routing.intent,
        "confidence": round(routing.confidence, 4),
        "margin": round(routing.margin, 4),
        "reason": routing.reason,
    }


def source_dict(source: Source | None) -> dict[str, str] | None:
    if source is None:
        return None
    return {"kind": source.kind, "id": source.id, "question": source.question}
