"""One customer-service turn: session -> fast path, or context -> admission -> engine -> store.

The turn is an async generator of TurnEvents so the HTTP layer only encodes.
Everything that can wait until after the reply (storing the turn, caching the
answer) does; the turn is stored even when the client leaves mid-reply, so
nothing is lost.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kefu.engine.base import (
    ChatMessage,
    Finished,
    GenerationRequest,
    SamplingParams,
    Tokenizer,
    Usage,
    unread_tokens,
)
from kefu.errors import (
    EngineError,
    InvalidRequest,
    NotFound,
    Overloaded,
    QueueFull,
    QueueTimeout,
    Unavailable,
    UpstreamError,
)
from kefu.fastpath.router import Routing
from kefu.fastpath.rules import is_failure_signal
from kefu.knowledge.index import Hit
from kefu.limits.holds import Ticket
from kefu.memory.context import BuiltContext, build_context
from kefu.memory.keeper import whole_turns
from kefu.memory.render import memory_block
from kefu.observe.timeline import Timeline
from kefu.service.busy import TurnBusy, busy_answer
from kefu.service.groups import Group, turn_intent
from kefu.service.plan import Plan, Source, Tier
from kefu.service.runtime import Runtime
from kefu.sessions.events import SessionEvent
from kefu.store.base import Session, StoredMessage, Turn
from kefu.text.message import Message, read_message
from kefu.text.normalize import normalize


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

GENERAL = Routing(intent="general", confidence=0.0, margin=0.0, candidates=())


def earlier_failures(stored: list[StoredMessage]) -> int:
    """Consecutive latest turns in which the customer said the bot's answer did not help."""
    count = 0
    for message in reversed([m for m in stored if m.role == "assistant" and "failed" in m.meta]):
        if not message.meta["failed"]:
            break
        count += 1
    return count


def asks_again(message: Message, stored: list[StoredMessage]) -> bool:
    """The customer repeats the previous question: the last answer did not help."""
    users = [m for m in stored if m.role == "user" and m.content]
    return bool(users) and normalize(users[-1].content) == message.normal


async def run_turn(
    runtime: Runtime,
    *,
    message: str,
    session_id: str | None,
    user_id: str | None,
    tenant: str,
    timeline: Timeline,
    owner: str | None = None,
    open_missing: bool = False,
) -> AsyncGenerator[TurnEvent, None]:
    """Errors raised before the first event are the caller's to turn into an HTTP status.

    ``owner``: the authenticated caller; a session someone else began is not found.
    ``open_missing``: a channel names its sessions itself (one per WeChat user), and the
    first message to a ``session_id`` that does not exist yet begins it."""
    settings = runtime.settings
    if len(message) > settings.max_message_chars:
        raise InvalidRequest(
            f"the message is {len(message)} characters; the limit is {settings.max_message_chars}",
            param="message",
        )
    # An answer request from the start ("llm" until the fast path answers it).
    timeline.outcome.tier = "llm"
    fast_path = runtime.fast_path
    if fast_path is None:
        runtime.check_ready()
    is_new = session_id is None
    if session_id is None:
        session_id = uuid.uuid4().hex

    async with runtime.locks.hold(session_id):
        # Under the lock, after the previous turn is stored: a first turn still running
        # holds the lock, and its store creates the session.
        await runtime.settled(session_id)
        session: Session | None = None
        stored: list[StoredMessage] = []
        if not is_new:
            # Two turns back at least: this turn's number, and whether the bot failed twice.
            turns = max(settings.history_turns, 2)
            if settings.memory == "summary" or settings.history_turns:
                turns = max(turns, max_unsummarised(settings.history_turns, settings.memory_every))
            session, stored = await runtime.store.resume(session_id, turns)
            if session is None and open_missing:
                is_new = True
            elif session is None or not visible(session, owner):
                raise NotFound(
                    f"no session {session_id!r}; omit session_id to start one", param="session_id"
                )
        timeline.mark("session_locked")
        turn_number = stored[-1].turn + 1 if stored else 1
        timeline.outcome.turn = turn_number
        # Read once: the fast path's every step reads this, none normalises it again.
        read = read_message(message) if fast_path is None else fast_path.read(message)
        repeated = asks_again(read, stored)
        # Kept with the turn, so the next turns can count failures in a row.
        failed = repeated or is_failure_signal(read)

        plan: Plan | None = None
        ticket: Ticket | None = None
        group = runtime.groups.default
        try:
            if session is not None and session.state == "handoff":
                plan = runtime.handoff_waiting(read.lang)
            elif fast_path is not None:
                scope = fast_path.scope(tenant)
                # The router counts a message that says so itself; a repeat only we can see.
                failures = earlier_failures(stored) + repeated
                # A message the engine could not take now gets no second look: it would
                # spend 20-70 ms of a core, shared with the decoding, before the same
                # refusal. One it could take holds a ticket through its second look, so the
                # messages behind it count it as a prompt ahead: ten first messages at
                # once all saw the engine free, all queued for second looks, and the last
                # was refused 143 ms after it came.
                ticket = runtime.admission.ticket_if_free()
                plan = await fast_path.plan(
                    read, scope=scope, failures=failures, second_look=ticket is not None
                )
            timeline.mark("routed")
            # aclosing: a client that leaves closes this generator, and the inner one must
            # run its finally (free the engine slot, store the turn) now, not at GC.
            if plan is not None and plan.reply is not None:
                answer = _answer_fast(
                    runtime, session_id, message, user_id, plan, failed, timeline, owner
                )
                try:
                    async with aclosing(answer) as events:
                        async for event in events:
                            yield event
                finally:
                    if settings.memory == "summary":
                        runtime.memory.turn_ended(session_id, turn_number, 0)
                return

            if plan is not None and fast_path is not None and len(runtime.groups) > 1:
                intent = turn_intent(plan.routing)
                group = runtime.groups.for_intent(intent)
                if ticket is not None and group is not runtime.groups.default:
                    runtime.admission.release(ticket)  # the second look's, not this group's
                    ticket = None
            runtime.check_ready(group)
            if ticket is None:
                try:
                    # Before the memory is read and the prompt built: a refusal costs a
                    # millisecond.
                    ticket = group.admission.check()
                except (Overloaded, QueueFull) as exc:
                    yield _busy(
                        runtime, exc, None if is_new else session_id, read.lang, plan, timeline
                    )
                    return
            started = False
            covered = 0
            try:
                memory = None
                if settings.memory == "summary" and not is_new:
                    memory = await runtime.store.load_memory(session_id)
                covered = memory.covered_turn if memory is not None else 0
                history = prompt_history(
                    stored, settings.history_turns, settings.memory, covered, settings.memory_every
                )
                generation = _answer_by_llm(
                    runtime,
                    session_id=session_id,
                    message=message,
                    user_id=user_id,
                    history=history,
                    plan=plan,
                    failed=failed,
                    tenant=tenant,
                    first_turn=turn_number == 1,
                    timeline=timeline,
                    owner=owner,
                    memory=memory_block(memory),
                    ticket=ticket,
                    group=group,
                )
                async with aclosing(generation) as events:
                    async for event in events:
                        started = True
                        yield event
            except (Overloaded, QueueFull, QueueTimeout) as exc:
                if started:
                    raise
                yield _busy(runtime, exc, None if is_new else session_id, read.lang, plan, timeline)
                return
            finally:
                if settings.memory == "summary" and started:
                    runtime.memory.turn_ended(session_id, turn_number, covered)
        finally:
            if ticket is not None:
                group.admission.release(ticket)  # nothing once its slot took it


def _busy(
    runtime: Runtime,
    exc: Unavailable,
    session_id: str | None,
    lang: str,
    plan: Plan | None,
    timeline: Timeline,
) -> TurnBusy:
    """Refused before the reply began: a shop's "busy" answer, and nothing stored."""
    timeline.outcome.error = exc.code
    return busy_answer(
        exc=exc,
        session_id=session_id,
        lang=lang,
        passages=plan.passages if plan is not None else (),
        agents=runtime.handoff_hours(lang),
    )


def max_unsummarised(window: int, every: int) -> int:
    """Turns a prompt holds at most: the window, the turns until the next fold, and (in
    summary mode) as many again while a late fold catches up."""
    return window + 2 * every


def prompt_history(
    stored: list[StoredMessage], window: int, memory: str, covered: int, every: int
) -> list[list[ChatMessage]]:
    """The turns after ``covered`` (what the memory holds), at most ``max_unsummarised``.

    Old turns leave in blocks of ``every``, never one per turn: a prompt that slid by a turn
    would differ from the previous one right after the persona, and the prefix cache could
    reuse nothing of the conversation. ``window`` mode has no memory, so it drops the block
    itself: it keeps the last ``window`` to ``window + every - 1`` turns."""
    turns = whole_turns(stored)
    if memory == "window":
        if not window or not turns:
            return []
        covered = max(0, (turns[-1][0] - window) // every * every)
    kept = [chat for number, chat in turns if number > covered]
    return kept[-max_unsummarised(window, every) :]


async def _answer_fast(
    runtime: Runtime,
    session_id: str,
    message: str,
    user_id: str | None,
    plan: Plan,
    failed: bool,
    timeline: Timeline,
    owner: str | None,
) -> AsyncGenerator[TurnEvent, None]:
    assert plan.reply is not None
    timeline.outcome.tier = plan.tier
    timeline.mark("answered")
    handoff = plan.tier == "handoff"
    meta: dict[str, Any] = {
        "tier": plan.tier,
        "route": routing_dict(plan.routing),
        "source": source_dict(plan.source),
        "failed": failed,
    }
    turn = Turn(
        user=message,
        assistant=plan.reply,
        meta=meta,
        state="handoff" if handoff else None,
        state_reason=plan.routing.reason if handoff else None,
    )
    if plan.source is not None and plan.source.kind == "kb":
        runtime.count_asked(plan.source.id)
    stored = False
    try:
        yield TurnStarted(session_id)
        yield TurnToken(plan.reply)
        if handoff:
            hours = runtime.handoff_hours()
            yield TurnHandoff(session_id, plan.routing.reason, hours[0], hours[1])
        timeline.mark("done")
        meta["timings"] = timings = timeline.as_dict()
        # Stored before `done`: a `done` promises the turn is kept, even through a kill -9
        # right after it; a failed write is an error event, not a `done`.
        stored = True
        await runtime.store.append_turn(session_id, turn, user_id, owner)
        yield TurnDone(
            session_id,
            plan.reply,
            plan.tier,
            Usage(0, 0),
            timings,
            plan.routing,
            plan.source,
        )
        if runtime.fast_path is not None and plan.tier == "faq":
            runtime.fast_path.after_reply(message, plan, runtime.spawn)
    finally:
        if not stored:
            runtime.write_behind(
                session_id, runtime.store.append_turn(session_id, turn, user_id, owner)
            )
        if handoff:
            runtime.spawn(
                runtime.events.publish(
                    session_id,
                    SessionEvent("state", {"state": "handoff", "reason": plan.routing.reason}),
                )
            )


async def _answer_by_llm(
    runtime: Runtime,
    *,
    session_id: str,
    message: str,
    user_id: str | None,
    history: list[list[ChatMessage]],
    plan: Plan | None,
    failed: bool,
    tenant: str,
    first_turn: bool,
    timeline: Timeline,
    owner: str | None,
    ticket: Ticket,
    group: Group,
    memory: str = "",
) -> AsyncGenerator[TurnEvent, None]:
    settings = runtime.settings
    timeline.outcome.tier = "llm"
    routing = plan.routing if plan is not None else GENERAL
    passages = plan.passages if plan is not None else ()
    engine = group.engine
    max_tokens = min(settings.max_tokens, engine.context_window // 2)
    build = partial(
        build_context,
        persona=settings.persona,
        knowledge=[(hit.entry.question, hit.entry.answer) for hit in passages],
        history=history,
        message=message,
        tokenizer=engine,
        budget=engine.context_window - max_tokens,
        memory=memory,
    )
    # On a prompt thread: the trimming may tokenize it repeatedly.
    context, unread = await runtime.build_prompt(lambda: _counted(build(), engine))
    timeline.mark("context_built")
    request = GenerationRequest(
        messages=context.messages,
        sampling=SamplingParams(max_tokens=max_tokens, temperature=settings.temperature),
        request_id=session_id,
        routing_key=session_id,
        group=group.name,
    )
    async with runtime.admitted(timeline, ticket, unread, group) as hold:
        yield TurnStarted(session_id)
        parts: list[str] = []
        outcome = "cancelled"
        stored = False
        try:
            finished: Finished | None = None
            async with aclosing(runtime.generate(request, timeline, hold)) as events:
                async for event in events:
                    if isinstance(event, Finished):
                        finished = event
                    elif event.text:  # a remote engine's delta may be all else (reasoning)
                        parts.append(event.text)
                        yield TurnToken(event.text)
            if finished is None:
                raise EngineError("the engine ended the reply without finishing it")
            outcome = finished.finish_reason
            timeline.mark("done")
            # Stored before `done`, as above; a turn cut short is stored after, below.
            turn = _llm_turn(message, parts, outcome, routing, passages, failed, timeline)
            stored = True
            await runtime.store.append_turn(session_id, turn, user_id, owner)
            yield TurnDone(
                session_id,
                "".join(parts),
                "llm",
                finished.usage,
                timeline.as_dict(),
                routing,
                routed=timeline.routing(),
            )
        except Exception as exc:
            # An engine that died mid-reply: what it had said is kept, marked as such.
            outcome = "interrupted" if isinstance(exc, UpstreamError) and parts else "error"
            raise
        finally:
            reply = "".join(parts)
            # After the reply, in a task of its own: a client that leaves must not cost
            # the conversation its turn, and nobody waits for the disk before the end.
            if not stored:
                turn = _llm_turn(message, parts, outcome, routing, passages, failed, timeline)
                runtime.write_behind(
                    session_id, runtime.store.append_turn(session_id, turn, user_id, owner)
                )
            # Only an answer that rests on nothing the customer said before is reusable.
            fast_path = runtime.fast_path
            if fast_path is not None and plan is not None and outcome == "stop":
                fast_path.after_reply(message, plan, runtime.spawn)
            vector = plan.vector if plan is not None else None
            if (
                first_turn
                and outcome == "stop"
                and reply.strip()
                and fast_path
                and vector is not None
            ):
                sources = [hit.entry.id for hit in passages]
                runtime.spawn(
                    runtime.remember(
                        fast_path, fast_path.scope(tenant), message, reply, vector, sources
                    )
                )


def _counted(context: BuiltContext, tokenizer: Tokenizer) -> tuple[BuiltContext, int]:
    """The context, and its prompt's tokens the engine will have to read."""
    return context, unread_tokens(tokenizer, context.messages, context.prompt_tokens)


def _llm_turn(
    message: str,
    parts: list[str],
    outcome: str,
    routing: Routing,
    passages: Sequence[Hit],
    failed: bool,
    timeline: Timeline,
) -> Turn:
    meta: dict[str, Any] = {
        "tier": "llm",
        "finish_reason": outcome,
        "route": routing_dict(routing),
        "sources": [hit.entry.id for hit in passages],
        "failed": failed,
        "timings": timeline.as_dict(),
    }
    if (routed := timeline.routing()) is not None:
        meta["routed"] = routed
    return Turn(user=message, assistant="".join(parts), meta=meta)


def visible(session: Session, owner: str | None) -> bool:
    """A session is seen by its owner only; ``owner`` None (no auth, or the admin scope)
    sees every session."""
    return owner is None or session.owner == owner


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
