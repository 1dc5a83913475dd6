"""The LLM's answer: the prompt (persona, memory, passages, turns) built to fit the engine's
window, an admission slot, the engine's tokens streamed, and the turn stored; after the
reply, the judge and the answer cache hear of it."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kefu.engine.base import (
    Finished,
    GenerationRequest,
    SamplingParams,
    system_between_turns,
)
from kefu.errors import EngineError, UpstreamError
from kefu.fastpath.router import Routing
from kefu.knowledge.index import Hit
from kefu.limits.holds import Ticket
from kefu.memory.context import KeptTurns, build_context
from kefu.service.groups import Group
from kefu.service.plan import Plan
from kefu.service.prompt_fit import Fitted, fit_prompt
from kefu.service.runtime import Runtime
from kefu.service.turn_context import TurnContext
from kefu.service.turn_events import TurnDone, TurnEvent, TurnStarted, TurnToken, routing_dict
from kefu.store.base import Turn

GENERAL = Routing(intent="general", confidence=0.0, margin=0.0, candidates=())


@dataclass(slots=True)
class _Reply:
    """The engine's reply as it comes: its text so far, how it ended, whether it is stored."""

    prompt: Fitted  # the prompt it answers, as built (and fitted to the SLO, if it was)
    parts: list[str] = field(default_factory=list)
    outcome: str = "cancelled"
    stored: bool = False

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def knowledge(self) -> tuple[tuple[str, str], ...]:
        """The entries sent with the message."""
        return self.prompt.context.knowledge


async def answer_by_llm(
    runtime: Runtime,
    turn: TurnContext,
    plan: Plan | None,
    *,
    group: Group,
    ticket: Ticket,
    history: KeptTurns,
    memory: str = "",
) -> AsyncGenerator[TurnEvent, None]:
    """``plan``: the fast path's, when it declined (its passages go in the prompt); None
    without a fast path. ``ticket``: let through ``group``'s admission door. ``history``:
    the turns the prompt holds; ``memory``: the memory's block of the turns before."""
    timeline = turn.timeline
    timeline.outcome.tier = "llm"
    request, fitted = await _request(runtime, turn, plan, group, ticket, history, memory)
    async with runtime.admitted(timeline, ticket, fitted.unread, group) as hold:
        yield TurnStarted(turn.session_id)
        reply = _Reply(fitted)
        try:
            finished: Finished | None = None
            async with aclosing(runtime.generate(request, timeline, hold)) as events:
                async for event in events:
                    if isinstance(event, Finished):
                        finished = event
                    elif event.text:  # a remote engine's delta may be all else (reasoning)
                        reply.parts.append(event.text)
                        yield TurnToken(event.text)
            if finished is None:
                raise EngineError("the engine ended the reply without finishing it")
            reply.outcome = finished.finish_reason
            timeline.mark("done")
            # Stored before `done`, as a fast answer is: a `done` promises the turn is kept;
            # a turn cut short is stored after, in _after_reply.
            record = _llm_turn(turn, plan, reply)
            reply.stored = True
            await runtime.store.append_turn(turn.session_id, record, turn.user_id, turn.owner)
            yield TurnDone(
                turn.session_id,
                reply.text,
                "llm",
                finished.usage,
                timeline.as_dict(),
                _routing(plan),
                routed=timeline.routing(),
            )
        except Exception as exc:
            # An engine that died mid-reply: what it had said is kept, marked as such.
            interrupted = isinstance(exc, UpstreamError) and reply.parts
            reply.outcome = "interrupted" if interrupted else "error"
            raise
        finally:
            _after_reply(runtime, turn, plan, reply)


async def _request(
    runtime: Runtime,
    turn: TurnContext,
    plan: Plan | None,
    group: Group,
    ticket: Ticket,
    history: KeptTurns,
    memory: str,
) -> tuple[GenerationRequest, Fitted]:
    """The request for ``group``'s engine, its prompt trimmed to leave room for the reply
    and (--fit-to-slo, policy predicted) fitted to what the engine can read in time; the
    prompt as built, with its tokens the engine will have to read."""
    settings = runtime.settings
    engine = group.engine
    max_tokens = min(settings.max_tokens, engine.context_window // 2)
    build = partial(
        build_context,
        persona=settings.persona,
        knowledge=[(hit.entry.question, hit.entry.answer) for hit in _passages(plan)],
        history=history.sent,
        plain_history=history.plain,
        knowledge_as_system=system_between_turns(engine),
        message=turn.message,
        tokenizer=engine,
        budget=engine.context_window - max_tokens,
        memory=memory,
    )
    admission = group.admission
    readable = None
    if settings.fit_to_slo and admission.policy == "predicted":
        readable = admission.readable(turn.timeline.marks["received"], ticket)
    # On a prompt thread: the trimming may tokenize it repeatedly.
    fitted = await runtime.build_prompt(lambda: fit_prompt(build, engine, readable))
    turn.timeline.mark("context_built")
    turn.timeline.outcome.fitted_tokens = fitted.saved or None
    request = GenerationRequest(
        messages=fitted.context.messages,
        sampling=SamplingParams(max_tokens=max_tokens, temperature=settings.temperature),
        request_id=turn.session_id,
        routing_key=turn.session_id,
        group=group.name,
    )
    return request, fitted


def _after_reply(runtime: Runtime, turn: TurnContext, plan: Plan | None, reply: _Reply) -> None:
    """After the reply, in tasks of their own: a client that leaves must not cost the
    conversation its turn, and nobody waits for the disk before the end."""
    text = reply.text
    if not reply.stored:
        record = _llm_turn(turn, plan, reply)
        runtime.write_behind(
            turn.session_id,
            runtime.store.append_turn(turn.session_id, record, turn.user_id, turn.owner),
        )
    # Only an answer that rests on nothing the customer said before is reusable.
    fast_path = runtime.fast_path
    if fast_path is not None and plan is not None and reply.outcome == "stop":
        fast_path.after_reply(turn.message, plan, runtime.spawn)
    vector = plan.vector if plan is not None else None
    if (
        turn.number == 1
        and reply.outcome == "stop"
        and text.strip()
        and fast_path
        and vector is not None
    ):
        sources = [hit.entry.id for hit in _passages(plan)]
        runtime.spawn(
            runtime.remember(
                fast_path, fast_path.scope(turn.tenant), turn.message, text, vector, sources
            )
        )


def _llm_turn(turn: TurnContext, plan: Plan | None, reply: _Reply) -> Turn:
    timeline = turn.timeline
    meta: dict[str, Any] = {
        "tier": "llm",
        "finish_reason": reply.outcome,
        "route": routing_dict(_routing(plan)),
        "sources": [hit.entry.id for hit in _passages(plan)],
        # As sent: the next prompts repeat the message with them (memory.keeper.whole_turns).
        "knowledge": [list(entry) for entry in reply.knowledge],
        # What the prompt left out to be read within the SLO (--fit-to-slo), if anything.
        **({"fitted": reply.prompt.meta()} if reply.prompt.saved else {}),
        "failed": turn.failed,
        "timings": timeline.as_dict(),
    }
    if (routed := timeline.routing()) is not None:
        meta["routed"] = routed
    return Turn(user=turn.message, assistant=reply.text, meta=meta)


def _routing(plan: Plan | None) -> Routing:
    return plan.routing if plan is not None else GENERAL


def _passages(plan: Plan | None) -> Sequence[Hit]:
    return plan.passages if plan is not None else ()
