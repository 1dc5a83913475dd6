"""The fast path's own answer (a rule, the knowledge base, the cache, a handoff): the plan's
reply as one token, stored before `done`, no engine."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from kefu.engine.base import Usage
from kefu.service.plan import Plan
from kefu.service.runtime import Runtime
from kefu.service.turn_context import TurnContext
from kefu.service.turn_events import (
    TurnDone,
    TurnEvent,
    TurnHandoff,
    TurnStarted,
    TurnToken,
    routing_dict,
    source_dict,
)
from kefu.sessions.events import SessionEvent
from kefu.store.base import Turn


async def answer_fast(
    runtime: Runtime, turn: TurnContext, plan: Plan
) -> AsyncGenerator[TurnEvent, None]:
    assert plan.reply is not None
    timeline = turn.timeline
    timeline.outcome.tier = plan.tier
    timeline.mark("answered")
    handoff = plan.tier == "handoff"
    record = _fast_turn(turn, plan)
    if plan.source is not None and plan.source.kind == "kb":
        runtime.count_asked(plan.source.id)
    stored = False
    try:
        yield TurnStarted(turn.session_id)
        yield TurnToken(plan.reply)
        if handoff:
            hours = runtime.handoff_hours()
            yield TurnHandoff(turn.session_id, plan.routing.reason, hours[0], hours[1])
        timeline.mark("done")
        record.meta["timings"] = timings = timeline.as_dict()
        # Stored before `done`: a `done` promises the turn is kept, even through a kill -9
        # right after it; a failed write is an error event, not a `done`.
        stored = True
        await runtime.store.append_turn(turn.session_id, record, turn.user_id, turn.owner)
        yield TurnDone(
            turn.session_id,
            plan.reply,
            plan.tier,
            Usage(0, 0),
            timings,
            plan.routing,
            plan.source,
        )
        if runtime.fast_path is not None and plan.tier == "faq":
            runtime.fast_path.after_reply(turn.message, plan, runtime.spawn)
    finally:
        if not stored:
            runtime.write_behind(
                turn.session_id,
                runtime.store.append_turn(turn.session_id, record, turn.user_id, turn.owner),
            )
        if handoff:
            runtime.spawn(
                runtime.events.publish(
                    turn.session_id,
                    SessionEvent("state", {"state": "handoff", "reason": plan.routing.reason}),
                )
            )


def _fast_turn(turn: TurnContext, plan: Plan) -> Turn:
    """The turn to store; its timings join its meta when the reply is out."""
    assert plan.reply is not None
    handoff = plan.tier == "handoff"
    meta: dict[str, Any] = {
        "tier": plan.tier,
        "route": routing_dict(plan.routing),
        "source": source_dict(plan.source),
        "failed": turn.failed,
    }
    return Turn(
        user=turn.message,
        assistant=plan.reply,
        meta=meta,
        state="handoff" if handoff else None,
        state_reason=plan.routing.reason if handoff else None,
    )
