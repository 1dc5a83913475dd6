"""Reviewing the miss log: a declined message a person has read becomes a question of
the entry whose answer answers it, or is set aside.

This is how the knowledge base learns its customers' wording. An accepted miss is a
real customer's phrasing of an answer, the kind of wording the calibration's probes
cannot make from a one-question FAQ: once added, the next calibration holds it out
as a ``phrasing`` probe, so both the decision and its estimate learn from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from kefu.errors import InvalidRequest, NotFound
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.entries import KbEntry, answer_key
from kefu.knowledge.misses import Miss, MissLog, phrasing

# Entries offered for a miss under review: the recorded best and the nearest others.
CANDIDATES = 3
Outcome = Literal["accepted", "rejected", "skipped"]


def accept(kb: KnowledgeBase, log: MissLog, miss_id: int, entry_id: str | None) -> KbEntry:
    """Add miss ``miss_id`` as a question of ``entry_id``'s answer (default: the entry
    recorded with it) and mark it accepted. Returns the new entry."""
    miss = log.get(miss_id)
    if miss.state != "open":
        raise InvalidRequest(f"miss {miss_id} was {miss.state} already", param="miss_id")
    chosen = entry_id or miss.entry_id
    entry = kb.get(chosen)
    if entry is None:
        raise NotFound(f"no knowledge entry with id {chosen}", param="entry_id")
    added = phrasing(miss, entry)
    kb.add([added])
    log.settle([miss_id], "accepted")
    return added


def candidates(kb: KnowledgeBase, miss: Miss) -> list[KbEntry]:
    """The entry recorded with the miss, then the FAQ entries nearest it, one per answer."""
    found: dict[str, KbEntry] = {}
    recorded = kb.get(miss.entry_id)
    if recorded is not None:
        found[answer_key(recorded.answer)] = recorded
    for hit in kb.search(miss.message, k=CANDIDATES * 4, kind="faq"):
        found.setdefault(answer_key(hit.entry.answer), hit.entry)
    return list(found.values())[:CANDIDATES]


def review(
    kb: KnowledgeBase,
    log: MissLog,
    *,
    ask: Callable[[str], str],
    say: Callable[[str], None],
    limit: int,
) -> dict[Outcome, int]:
    """Go through the open misses, most frequent first: a number accepts the miss as that
    candidate's question, an entry id as that entry's, ``r`` rejects, ``s`` skips, ``q``
    stops."""
    done: dict[Outcome, int] = {"accepted": 0, "rejected": 0, "skipped": 0}
    for miss in log.top(limit):
        offered = candidates(kb, miss)
        say(f"\n[{miss.id}] x{miss.count}  {miss.message}\n    declined: {miss.reason}")
        for n, entry in enumerate(offered, 1):
            say(f"  {n}. {entry.question}  [{entry.id}]\n       {_short(entry.answer)}")
        while True:
            prompt = f"accept as 1-{len(offered)} / ENTRY_ID, r reject, s skip, q quit: "
            reply = ask(prompt).strip()
            if reply == "q":
                return done
            if reply in ("s", ""):
                done["skipped"] += 1
                break
            if reply == "r":
                log.settle([miss.id], "rejected")
                done["rejected"] += 1
                break
            chosen = (
                offered[int(reply) - 1].id
                if reply.isdigit() and 1 <= int(reply) <= len(offered)
                else reply
            )
            try:
                accept(kb, log, miss.id, chosen)
            except (NotFound, InvalidRequest) as exc:
                say(f"  {exc.message}")
                continue
            done["accepted"] += 1
            break
    return done


def _short(text: str, width: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
