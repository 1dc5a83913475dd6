"""One customer-service turn: session -> fast path, or context -> admission -> engine -> store.

The turn is an async generator of TurnEvents so the HTTP layer only encodes.
Everything that can wait until after the reply (storing the turn, caching the
answer) does; the turn is stored even when the client leaves mid-reply, so
nothing is lost.

Its steps: take the session (``_take_session``), let the fast path plan the answer
(``_plan_answer``), then answer by the plan (``fast_answer.py``: a rule, the knowledge
base, the cache, a handoff) or by the LLM (``llm_answer.py``); each answer stores the
turn before its ``done``. ``TurnContext`` (``turn_context.py``) carries the turn's facts
through the steps.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing

from kefu.engine.base import system_between_turns
from kefu.errors import InvalidRequest, NotFound, Overloaded, QueueFull, QueueTimeout, Unavailable
from kefu.fastpath.rules import is_failure_signal
from kefu.limits.holds import Ticket
from kefu.memory.render import memory_block
from kefu.observe.timeline import Timeline
from kefu.service.busy import TurnBusy, busy_answer
from kefu.service.fast_answer import answer_fast
from kefu.service.groups import Group, turn_intent
from kefu.service.history import max_unsummarised, prompt_history, turns_to_load
from kefu.service.llm_answer import answer_by_llm
from kefu.service.plan import Plan
from kefu.service.read_ahead import read_ahead
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
from kefu.store.base import Session, StoredMessage
from kefu.text.message import Message, read_message
from kefu.text.normalize import normalize

# The events live in turn_events.py, where the answer modules yield them too; the HTTP
# layer and the channels take them, and the records' forms, from here.
__all__ = [
    "TurnDone",
    "TurnEvent",
    "TurnHandoff",
    "TurnStarted",
    "TurnToken",
    "asks_again",
    "earlier_failures",
    "max_unsummarised",
    "prompt_history",
    "routing_dict",
    "run_turn",
    "source_dict",
    "visible",
]


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
    limit = runtime.settings.max_message_chars
    if len(message) > limit:
        raise InvalidRequest(
            f"the message is {len(message)} characters; the limit is {limit}", param="message"
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
        session, stored, is_new = await _take_session(
            runtime, session_id, is_new=is_new, owner=owner, open_missing=open_missing
        )
        timeline.mark("session_locked")
        number = stored[-1].turn + 1 if stored else 1
        timeline.outcome.turn = number
        # Read once: the fast path's every step reads this, none normalises it again.
        read = read_message(message) if fast_path is None else fast_path.read(message)
        repeated = asks_again(read, stored)
        turn = TurnContext(
            session_id=session_id,
            is_new=is_new,
            message=message,
            read=read,
            user_id=user_id,
            owner=owner,
            tenant=tenant,
            timeline=timeline,
            number=number,
            repeated=repeated,
            failed=repeated or is_failure_signal(read),
        )
        # aclosing: a client that leaves closes this generator, and the inner one must
        # run its finally (free the engine slot, store the turn) now, not at GC.
        async with aclosing(_answer(runtime, turn, session, stored)) as events:
            async for event in events:
                yield event


async def _take_session(
    runtime: Runtime, session_id: str, *, is_new: bool, owner: str | None, open_missing: bool
) -> tuple[Session | None, list[StoredMessage], bool]:
    """The session (None for one this turn begins), its latest turns, and whether this
    turn begins it; raises NotFound for a session the caller may not see."""
    # Under the lock, after the previous turn is stored: a first turn still running
    # holds the lock, and its store creates the session.
    await runtime.settled(session_id)
    if is_new:
        return None, [], True
    session, stored = await runtime.store.resume(session_id, turns_to_load(runtime.settings))
    if session is None and open_missing:
        return None, stored, True
    if session is None or not visible(session, owner):
        raise NotFound(
            f"no session {session_id!r}; omit session_id to start one", param="session_id"
        )
    return session, stored, False


async def _answer(
    runtime: Runtime, turn: TurnContext, session: Session | None, stored: list[StoredMessage]
) -> AsyncGenerator[TurnEvent, None]:
    """The plan's own answer if the fast path has one; else the LLM's, in the group the
    message's intent names, once its admission lets the turn through."""
    plan, ticket = await _plan_answer(runtime, turn, session, stored)
    group = runtime.groups.default
    try:
        turn.timeline.mark("routed")
        if plan is not None and plan.reply is not None:
            async with aclosing(_answer_by_plan(runtime, turn, plan)) as events:
                async for event in events:
                    yield event
            return
        group, ticket = _choose_group(runtime, plan, ticket)
        runtime.check_ready(group)
        if ticket is None:
            try:
                # Before the memory is read and the prompt built: a refusal costs a
                # millisecond.
                ticket = group.admission.check()
            except (Overloaded, QueueFull) as exc:
                yield _busy(runtime, exc, turn, plan)
                return
        answer = _answer_by_llm_or_busy(runtime, turn, plan, stored, group, ticket)
        async with aclosing(answer) as events:
            async for event in events:
                yield event
    finally:
        if ticket is not None:
            group.admission.release(ticket)  # nothing once its slot took it


async def _plan_answer(
    runtime: Runtime, turn: TurnContext, session: Session | None, stored: list[StoredMessage]
) -> tuple[Plan | None, Ticket | None]:
    """What the fast path makes of the message (None: there is no fast path), and the
    default group's ticket its second look held, if it could take one."""
    if session is not None and session.state == "handoff":
        return runtime.handoff_waiting(turn.read.lang), None
    fast_path = runtime.fast_path
    if fast_path is None:
        return None, None
    scope = fast_path.scope(turn.tenant)
    # The router counts a message that says so itself; a repeat only we can see.
    failures = earlier_failures(stored) + turn.repeated
    # A message the engine could not take now gets no second look: it would spend
    # 20-70 ms of a core, shared with the decoding, before the same refusal. One it could
    # take holds a ticket through its second look, so the messages behind it count it as
    # a prompt ahead: ten first messages at once all saw the engine free, all queued for
    # second looks, and the last was refused 143 ms after it came.
    ticket = runtime.admission.ticket_if_free()
    try:
        plan = await fast_path.plan(
            turn.read, scope=scope, failures=failures, second_look=ticket is not None
        )
    except BaseException:
        if ticket is not None:
            runtime.groups.default.admission.release(ticket)
        raise
    return plan, ticket


def _choose_group(
    runtime: Runtime, plan: Plan | None, ticket: Ticket | None
) -> tuple[Group, Ticket | None]:
    """The group that answers the message's intent, and the ticket still held for it: the
    second look's is the default group's, given back when another group answers."""
    group = runtime.groups.default
    if plan is not None and runtime.fast_path is not None and len(runtime.groups) > 1:
        intent = turn_intent(plan.routing)
        group = runtime.groups.for_intent(intent)
        if ticket is not None and group is not runtime.groups.default:
            runtime.admission.release(ticket)  # the second look's, not this group's
            ticket = None
    return group, ticket


async def _answer_by_plan(
    runtime: Runtime, turn: TurnContext, plan: Plan
) -> AsyncGenerator[TurnEvent, None]:
    """The fast path's answer; the memory hears the turn ended, with nothing folded, and
    the next model turn's prompt is read ahead where the engine has room."""
    try:
        async with aclosing(answer_fast(runtime, turn, plan)) as events:
            async for event in events:
                yield event
    finally:
        if runtime.settings.memory == "summary":
            runtime.memory.turn_ended(turn.session_id, turn.number, 0)
        runtime.spawn(read_ahead(runtime, turn.session_id))


async def _answer_by_llm_or_busy(
    runtime: Runtime,
    turn: TurnContext,
    plan: Plan | None,
    stored: list[StoredMessage],
    group: Group,
    ticket: Ticket,
) -> AsyncGenerator[TurnEvent, None]:
    """The LLM's answer with the session's memory and latest turns; a busy answer if
    admission refuses it before the reply begins."""
    settings = runtime.settings
    started = False
    covered = 0
    try:
        memory = None
        if settings.memory == "summary" and not turn.is_new:
            memory = await runtime.store.load_memory(turn.session_id)
        covered = memory.covered_turn if memory is not None else 0
        history = prompt_history(
            stored,
            settings.history_turns,
            settings.memory,
            covered,
            settings.memory_every,
            knowledge_as_system=system_between_turns(group.engine),
        )
        answer = answer_by_llm(
            runtime,
            turn,
            plan,
            group=group,
            ticket=ticket,
            history=history,
            memory=memory_block(memory),
        )
        async with aclosing(answer) as events:
            async for event in events:
                started = True
                yield event
    except (Overloaded, QueueFull, QueueTimeout) as exc:
        if started:
            raise
        yield _busy(runtime, exc, turn, plan)
    finally:
        if settings.memory == "summary" and started:
            runtime.memory.turn_ended(turn.session_id, turn.number, covered)


def _busy(runtime: Runtime, exc: Unavailable, turn: TurnContext, plan: Plan | None) -> TurnBusy:
    """Refused before the reply began: a shop's "busy" answer, and nothing stored."""
    turn.timeline.outcome.error = exc.code
    lang = turn.read.lang
    return busy_answer(
        exc=exc,
        session_id=None if turn.is_new else turn.session_id,
        lang=lang,
        passages=plan.passages if plan is not None else (),
        agents=runtime.handoff_hours(lang),
    )


def visible(session: Session, owner: str | None) -> bool:
    """A session is seen by its owner only; ``owner`` None (no auth, or the admin scope)
    sees every session."""
    return owner is None or session.owner == owner
