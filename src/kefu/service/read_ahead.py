"""The next model turn's prompt read ahead, after a turn the fast path answered.

The fast path's answers never pass through the engine, so a conversation it answered so
far has none of its turns in the engine's KV: its first turn for the model reads the
whole conversation (the persona, each question, each stored answer) before its first
token. Under ``kefu bench``'s sessions those turns read 330-610 tokens with 55 cached,
2-4 s on a 2-core box, past the SLO with a slot free and nothing ahead.

After such a turn, the start the next model turn's prompt will have (the system prompt and
the kept turns, as ``history.prompt_history`` renders them) is sent to the engine as
background work with one token to generate: the embedded engine runs it only in steps
with no customer, gives its slot up to the next customer, and keeps its KV for prefix
reuse, so the next model turn reads only its passages and message. It costs a busy
engine nothing and an idle one what it had spare, so it helps where the engine idles
between customers (a small shop's box), not under load. The next turn may be the fast
path's again, so one read runs at a time (the latest turn that ended meanwhile is read
next), none while the engine is full or has customers waiting, and none on an engine
that would serve it as a request like any other (a remote one). Nothing here can fail a
customer's turn: the reply was already sent.
"""

from __future__ import annotations

import logging

from kefu.engine.base import Engine, background_in_idle_steps, system_between_turns
from kefu.memory.prefill import prefill_next_prompt
from kefu.service.history import prompt_history, turns_to_load
from kefu.service.runtime import Runtime

log = logging.getLogger("kefu.read_ahead")

REQUEST_ID = "read-ahead"


def has_room(engine: Engine) -> bool:
    """A free slot and nobody waiting: work there would take nothing from a customer."""
    stats = engine.stats()
    return not stats.waiting and stats.running < stats.slots


async def read_ahead(runtime: Runtime, session_id: str) -> None:
    """Read the start of the session's next model prompt into the default engine's KV,
    where the settings put turns in the prompt and the engine keeps such work to its idle
    steps. One read at a time: a turn that ends meanwhile is read after it (the latest
    such turn only: an earlier one's reads less than it would)."""
    settings = runtime.settings
    if not settings.read_ahead or not background_in_idle_steps(runtime.groups.default.engine):
        return  # a remote engine would serve it as a request, at the customers' cost
    if settings.memory == "window" and not settings.history_turns:
        return  # the prompt holds no turns: nothing of the conversation to read
    if runtime.reading_ahead:
        runtime.read_ahead_next = session_id
        return
    runtime.reading_ahead = True
    try:
        next_id: str | None = session_id
        while next_id is not None:
            await _read(runtime, next_id)
            next_id, runtime.read_ahead_next = runtime.read_ahead_next, None
    finally:
        runtime.reading_ahead = False


async def _read(runtime: Runtime, session_id: str) -> None:
    settings = runtime.settings
    engine = runtime.groups.default.engine
    if not has_room(engine):
        return
    try:
        await runtime.settled(session_id)
        session, stored = await runtime.store.resume(session_id, turns_to_load(settings))
        if session is None or session.state == "handoff":
            return  # gone, or a human answers its next turns
        memory = None
        if settings.memory == "summary":
            memory = await runtime.store.load_memory(session_id)
        history = prompt_history(
            stored,
            settings.history_turns,
            settings.memory,
            memory.covered_turn if memory is not None else 0,
            settings.memory_every,
            knowledge_as_system=system_between_turns(engine),
        )
        if not history.sent or not has_room(engine):
            return
        log.debug("reading ahead %d turns of session %s", len(history.sent), session_id)
        await prefill_next_prompt(
            engine,
            persona=settings.persona,
            memory=memory,
            turns=history.sent,
            request_id=REQUEST_ID,
            routing_key=session_id,
            background=True,
        )
    except Exception as exc:  # only a cache miss for the next turn
        log.info("next prompt of session %s not read ahead: %s", session_id, exc)
