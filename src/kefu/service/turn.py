"""One customer-service turn: session -> lock -> context -> admission -> engine -> store.

The turn is an async generator of TurnEvents so the HTTP layer only encodes.
Everything that can wait until after the reply (storing the turn) does; the
turn is stored even when the client leaves mid-reply, so nothing is lost.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

from kefu.engine.base import ChatMessage, Finished, GenerationRequest, SamplingParams, Usage
from kefu.errors import EngineError, NotFound
from kefu.service.context import build_context
from kefu.service.runtime import Runtime
from kefu.service.timeline import Timeline
from kefu.store.base import StoredMessage, Turn

Tier = Literal["llm"]


@dataclass(frozen=True, slots=True)
class TurnStarted:
    session_id: str


@dataclass(frozen=True, slots=True)
class TurnToken:
    text: str


@dataclass(frozen=True, slots=True)
class TurnDone:
    session_id: str
    reply: str
    tier: Tier
    usage: Usage
    timings: dict[str, float] = field(default_factory=dict)


TurnEvent = TurnStarted | TurnToken | TurnDone


def history_messages(stored: list[StoredMessage]) -> list[ChatMessage]:
    """Complete user/assistant pairs only: a turn cut short with no reply is not context."""
    pairs = []
    for i in range(0, len(stored) - 1, 2):
        user, assistant = stored[i], stored[i + 1]
        if assistant.content.strip():
            pairs += [user.as_chat(), assistant.as_chat()]
    return pairs


async def run_turn(
    runtime: Runtime,
    *,
    message: str,
    session_id: str | None,
    user_id: str | None,
    timeline: Timeline,
) -> AsyncGenerator[TurnEvent, None]:
    """Errors raised before the first event are the caller's to turn into an HTTP status."""
    runtime.check_ready()
    settings = runtime.settings
    timeline.outcome.tier = "llm"
    is_new = session_id is None
    if session_id is None:
        session_id = uuid.uuid4().hex

    async with runtime.locks.hold(session_id):
        # Under the lock, after the previous turn is stored: a first turn still running
        # holds the lock, and its store creates the session.
        await runtime.settled(session_id)
        if not is_new and await runtime.store.get_session(session_id) is None:
            raise NotFound(
                f"no session {session_id!r}; omit session_id to start one", param="session_id"
            )
        timeline.mark("session_locked")
        # At least one turn back, to know this turn's number.
        stored = (
            []
            if is_new
            else await runtime.store.recent_turns(session_id, max(settings.history_turns, 1))
        )
        timeline.outcome.turn = stored[-1].turn + 1 if stored else 1
        if settings.history_turns == 0:
            stored = []
        max_tokens = min(settings.max_tokens, runtime.engine.context_window // 2)
        context = build_context(
            persona=settings.persona,
            history=history_messages(stored),
            message=message,
            tokenizer=runtime.engine,
            budget=runtime.engine.context_window - max_tokens,
        )
        timeline.mark("context_built")
        request = GenerationRequest(
            messages=context.messages,
            sampling=SamplingParams(max_tokens=max_tokens, temperature=settings.temperature),
            request_id=session_id,
        )
        async with runtime.admitted(timeline):
            yield TurnStarted(session_id)
            parts: list[str] = []
            outcome = "cancelled"
            try:
                finished: Finished | None = None
                async with aclosing(runtime.generate(request, timeline)) as events:
                    async for event in events:
                        if isinstance(event, Finished):
                            finished = event
                        else:
                            parts.append(event.text)
                            yield TurnToken(event.text)
                if finished is None:
                    raise EngineError("the engine ended the reply without finishing it")
                outcome = finished.finish_reason
                timeline.mark("done")
                yield TurnDone(
                    session_id, "".join(parts), "llm", finished.usage, timeline.as_dict()
                )
            except Exception:
                outcome = "error"
                raise
            finally:
                meta: dict[str, Any] = {
                    "tier": "llm",
                    "finish_reason": outcome,
                    "timings": timeline.as_dict(),
                }
                turn = Turn(user=message, assistant="".join(parts), meta=meta)
                # After the reply, in a task of its own: a client that leaves must not cost
                # the conversation its turn, and nobody waits for the disk before the end.
                runtime.write_behind(
                    session_id, runtime.store.append_turn(session_id, turn, user_id)
                )
