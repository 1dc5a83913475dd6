"""The turns a model turn's prompt holds, and how many of a session's to load for them."""

from __future__ import annotations

from kefu.memory.context import KeptTurns
from kefu.memory.keeper import whole_turns
from kefu.settings import Settings
from kefu.store.base import StoredMessage


def turns_to_load(settings: Settings) -> int:
    """A session's latest turns a turn reads: two at least (this turn's number, and whether
    the bot failed twice), and as many as a prompt may hold."""
    turns = max(settings.history_turns, 2)
    if settings.memory == "summary" or settings.history_turns:
        turns = max(turns, max_unsummarised(settings.history_turns, settings.memory_every))
    return turns


def max_unsummarised(window: int, every: int) -> int:
    """Turns a prompt holds at most: the window, the turns until the next fold, and (in
    summary mode) as many again while a late fold catches up."""
    return window + 2 * every


def prompt_history(
    stored: list[StoredMessage],
    window: int,
    memory: str,
    covered: int,
    every: int,
    *,
    knowledge_as_system: bool = False,
) -> KeptTurns:
    """The turns after ``covered`` (what the memory holds), at most ``max_unsummarised``: as
    the model read them, and without the knowledge they were sent with.

    Old turns leave in blocks of ``every``, never one per turn: a prompt that slid by a turn
    would differ from the previous one right after the persona, and the prefix cache could
    reuse nothing of the conversation. ``window`` mode has no memory, so it drops the block
    itself: it keeps the last ``window`` to ``window + every - 1`` turns."""
    turns = whole_turns(stored)
    if memory == "window":
        if not window or not turns:
            return KeptTurns([], [])
        covered = max(0, (turns[-1][0] - window) // every * every)
    # Turns are as the model read them, with their knowledge, but for those a fold kept:
    # they lose it when the prompt's start changes anyway, and the prompt stays small.
    sent = whole_turns(
        stored, sent_after=covered + window if covered else 0, as_system=knowledge_as_system
    )
    most = max_unsummarised(window, every)
    kept = [chat for number, chat in sent if number > covered][-most:]
    plain = [chat for number, chat in turns if number > covered][-most:]
    return KeptTurns(kept, plain)
