"""What ``/chat`` says when the engine cannot start a reply in time: a shop's answer to a
crowd (issue 23), not a bare error. The nearest knowledge-base entries the fast path
already found for the message, an offer of a human, and when to try again; nothing is
stored, so the conversation is as it was before the message."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kefu.errors import Unavailable
from kefu.knowledge.base import Hit


@dataclass(frozen=True, slots=True)
class Suggestion:
    id: str
    question: str
    answer: str


@dataclass(frozen=True, slots=True)
class TurnBusy:
    """The turn's only event when admission refused it."""

    session_id: str | None  # None for a conversation this message would have begun
    message: str
    retry_after: int  # whole seconds, as the Retry-After header says
    code: str  # the refusal's error code: overloaded, queue_full, queue_timeout
    reason: str  # the refusal's own message (what the OpenAI envelope would say)
    suggestions: tuple[Suggestion, ...]
    agents_available: bool
    service_hours: str


def retry_seconds(exc: Unavailable) -> int:
    return max(1, math.ceil(exc.retry_after))


def busy_answer(
    *,
    exc: Unavailable,
    session_id: str | None,
    lang: str,
    passages: Sequence[Hit],
    agents: tuple[bool, str],
) -> TurnBusy:
    """``lang``: the message's, as the turn read it (``Message.lang``)."""
    wait = retry_seconds(exc)
    suggestions = tuple(
        Suggestion(hit.entry.id, hit.entry.question, hit.entry.answer) for hit in passages
    )
    if lang == "zh":
        text = f"现在咨询的人比较多，请约 {wait} 秒后再发一次。"
        if suggestions:
            text += "下面这些常见问题也许能先帮到您。"
        text += "也可以说“转人工”，由客服为您处理。"
    else:
        text = f"We're busy right now; please send that again in about {wait} s."
        if suggestions:
            text += " Meanwhile, these answers may help."
        text += " You can also ask for a human agent."
    available, hours = agents
    return TurnBusy(
        session_id=session_id,
        message=text,
        retry_after=wait,
        code=exc.code,
        reason=exc.message,
        suggestions=suggestions,
        agents_available=available,
        service_hours=hours,
    )
