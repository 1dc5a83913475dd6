"""What one turn knows once its session is taken: who asks what, in which session, and
how the message reads. Every step of the turn (``service/turn.py``) reads it; none
changes it."""

from __future__ import annotations

from dataclasses import dataclass

from kefu.observe.timeline import Timeline
from kefu.text.message import Message


@dataclass(frozen=True, slots=True)
class TurnContext:
    session_id: str
    # The message begins its session: a busy answer names no session then, and there is
    # no memory to read.
    is_new: bool
    message: str  # as the customer wrote it: stored with the turn, and the prompt's
    read: Message  # the message read once, for every step
    user_id: str | None
    owner: str | None  # the authenticated caller, kept with a session it begins
    tenant: str
    timeline: Timeline
    number: int  # the turn's number in its session, from 1
    repeated: bool  # the customer repeats the previous question
    # Kept with the turn, so the next turns can count failures in a row.
    failed: bool
