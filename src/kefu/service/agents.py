"""What a human agent does with a handed-off session: list, read, reply, hand back."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from kefu.errors import NotFound, SessionConflict
from kefu.service.outbound import deliver_outbound
from kefu.service.runtime import Runtime
from kefu.sessions.events import SessionEvent
from kefu.store.base import Session, SessionMemory, StoredMessage

UNNAMED = "agent"


@dataclass(frozen=True, slots=True)
class WaitingSession:
    session: Session
    waiting_seconds: float
    last_customer_message: str | None
    # What the conversation's older turns came to (issue 21): what an agent reads first.
    memory: SessionMemory | None = None
    # The agent answering it, if one took it.
    claimed_by: str | None = None


async def waiting_sessions(runtime: Runtime, limit: int = 100) -> list[WaitingSession]:
    """Sessions waiting for a human, the longest wait first."""
    now = time.time()
    waiting = []
    for session in await runtime.store.sessions_in_state("handoff", limit):
        messages = await runtime.store.recent_turns(session.id, 1)
        last = next((m.content for m in reversed(messages) if m.role == "user"), None)
        since = session.state_since or session.updated_at
        memory = await runtime.store.load_memory(session.id)
        waiting.append(WaitingSession(session, round(now - since, 3), last, memory))
    holders = await runtime.claims.holders([w.session.id for w in waiting])
    return [replace(w, claimed_by=holders.get(w.session.id)) for w in waiting]


async def _handed_off(runtime: Runtime, session_id: str) -> Session:
    await runtime.settled(session_id)
    session = await runtime.store.get_session(session_id)
    if session is None:
        raise NotFound(f"no session {session_id!r}", param="session_id")
    if session.state != "handoff":
        raise SessionConflict(
            f"session {session_id!r} is not waiting for an agent (state {session.state!r})"
        )
    return session


async def claim(runtime: Runtime, session_id: str, agent: str) -> None:
    """Take the conversation for ``agent`` (or renew the claim); SessionConflict when
    another agent holds it, so two agents never answer one customer."""
    await _handed_off(runtime, session_id)
    holder = await runtime.claims.take(session_id, agent)
    if holder != agent:
        raise SessionConflict(f"session {session_id!r} is being answered by agent {holder!r}")


async def agent_reply(
    runtime: Runtime, session_id: str, text: str, agent: str | None
) -> tuple[StoredMessage, int]:
    """Store the reply in the conversation, then push it to the customer's open streams.
    The reply claims the conversation (an agent without a name claims it as "agent").

    Returns the stored message and how many open customer streams received it (a WeChat
    conversation's platform counts as one).
    """
    await claim(runtime, session_id, agent or UNNAMED)
    meta = {"tier": "agent", "agent": agent}
    message = await runtime.store.append_message(session_id, text, meta)
    if message is None:  # deleted between the check and the write
        raise NotFound(f"no session {session_id!r}", param="session_id")
    event = SessionEvent("agent", {"text": text, "agent": agent, "created_at": message.created_at})
    receivers = await runtime.events.publish(session_id, event)
    if runtime.outbound:
        session = await runtime.store.get_session(session_id)
        if session is not None:
            receivers += await deliver_outbound(runtime.outbound, session, text)
    return message, receivers


async def release(runtime: Runtime, session_id: str) -> Session:
    """Hand the conversation back to the bot."""
    await _handed_off(runtime, session_id)
    session = await runtime.store.set_state(session_id, "bot")
    if session is None:
        raise NotFound(f"no session {session_id!r}", param="session_id")
    await runtime.claims.drop(session_id)
    await runtime.events.publish(
        session_id, SessionEvent("state", {"state": "bot", "reason": None})
    )
    return session
