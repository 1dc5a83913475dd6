"""The rolling memory, built in the background after a turn's reply went out.

After each turn the keeper is told the session moved on. When more than
``window + every`` turns are not yet in the memory, it folds all but the last
``window`` of them into the memory, so the reply's prompt stays ``memory + the turns
since`` and only changes shape once every ``every`` turns (between folds it grows by
appending, which the prefix cache reuses).

A fold is code only and takes milliseconds: the facts (``facts.py``) and a summary
quoting the customer (``extractive.py``) are saved at once, so the memory is ready
for the next turn however busy the engine is. Then the next prompt's new start is
prefilled, so the prefix cache has it while the customer reads the reply: a customer's
request, not background work, because the next turn reads those tokens anyway (moved,
not added), and in idle steps alone a busy engine would not read them in time.
The model's own summary is ``background`` work (the embedded engine runs it only in
steps with no customer) and replaces the quotes when it comes, prefilled in turn.
Engine work is given up when the next fold is due: the memory it was for is out of date.

Work is coalesced per session: one job at a time, and a turn that ends while a job
runs asks for one more pass afterwards, not for a job of its own. A model summary that
fails or runs past ``timeout`` is logged and dropped; the quotes stay. Nothing here
can fail a customer's turn: the reply was already sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any, TypeVar

from kefu.engine.base import ChatMessage, Engine, Finished, GenerationRequest, SamplingParams
from kefu.memory.context import with_knowledge
from kefu.memory.extractive import extractive_summary
from kefu.memory.facts import merge_facts
from kefu.memory.prefill import prefill_next_prompt
from kefu.memory.render import summary_prompt
from kefu.store.base import SessionMemory, SessionStore, StoredMessage

log = logging.getLogger("kefu.memory")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MemoryWork:
    """What the keeper has done since start, for /metrics: the engine time it costs."""

    folds: int = 0
    model_summaries: int = 0  # model summaries that replaced the quotes
    failures: int = 0  # model summaries that failed or ran late
    summary_seconds: float = 0.0  # wall time spent waiting for model summaries


@dataclass(frozen=True, slots=True)
class MemoryPolicy:
    window: int  # turns kept verbatim after an update (--history-turns)
    every: int  # turns between updates (--memory-every)
    summary_tokens: int  # the summary's length cap (--summary-tokens)
    timeout: float  # seconds one update may take (--summary-timeout)
    order_pattern: str | None
    order_example: str | None
    persona: str

    @property
    def due_after(self) -> int:
        """Turns outside the memory that make an update due."""
        return self.window + self.every


class MemoryKeeper:
    def __init__(
        self,
        *,
        engine: Engine,
        store: SessionStore,
        policy: MemoryPolicy,
        settled: Callable[[str], Awaitable[None]],
    ) -> None:
        self.engine = engine
        self.store = store
        self.policy = policy
        self._settled = settled
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        # The engine work a job awaits, per session: cancelled when the next fold is due.
        self._waits: dict[str, asyncio.Future[Any]] = {}
        # Counters for the docs' "engine time per turn" and the benchmark.
        self.folds = 0  # code only
        self.model_summaries = 0  # model summaries that replaced the quotes
        self.failures = 0
        self.summary_seconds = 0.0

    def work(self) -> MemoryWork:
        return MemoryWork(self.folds, self.model_summaries, self.failures, self.summary_seconds)

    def turn_ended(self, session_id: str, turn: int, covered_turn: int) -> None:
        """Called after each turn, with what the prompt's memory covered; cheap when not due."""
        if turn - covered_turn < self.policy.due_after:
            return
        if session_id in self._jobs:
            self._again.add(session_id)
            wait = self._waits.get(session_id)
            if wait is not None:
                wait.cancel()  # engine work for a memory about to be replaced
            return
        task = asyncio.get_running_loop().create_task(self._run(session_id))
        self._jobs[session_id] = task

    async def idle(self) -> None:
        """Wait for every job (tests and benchmarks)."""
        while self._jobs:
            await asyncio.gather(*self._jobs.values(), return_exceptions=True)

    async def close(self) -> None:
        """Drop the jobs in flight: a summary is worth less than a fast shutdown."""
        for task in self._jobs.values():
            task.cancel()
        await asyncio.gather(*self._jobs.values(), return_exceptions=True)

    async def _run(self, session_id: str) -> None:
        try:
            while True:
                self._again.discard(session_id)
                try:
                    await self.update(session_id)
                except Exception as exc:  # logged; the next turn tries again
                    self.failures += 1
                    log.warning("memory of session %s not updated: %s", session_id, exc)
                if session_id not in self._again:
                    return
        finally:
            del self._jobs[session_id]

    async def update(self, session_id: str) -> SessionMemory | None:
        """Fold the turns that left the window, then improve on it with the engine;
        the memory saved last, or None when nothing had to be folded."""
        folded = await self.fold(session_id)
        if folded is None:
            return None
        memory, previous, newly, kept = folded
        await self._engine_work(session_id, self._warm(session_id, memory, kept))
        summary = await self._engine_work(session_id, self._model_summary(previous, newly))
        if not summary:
            return memory
        now = await self.store.load_memory(session_id)
        if now is None or now.covered_turn != memory.covered_turn:
            return now  # deleted, or folded elsewhere (another replica) meanwhile
        improved = replace(memory, summary=summary, updated_at=time.time())
        if not await self.store.save_memory(session_id, improved):
            return None
        self.model_summaries += 1
        await self._engine_work(session_id, self._warm(session_id, improved, kept))
        return improved

    async def fold(
        self, session_id: str
    ) -> tuple[SessionMemory, str, list[list[ChatMessage]], list[list[ChatMessage]]] | None:
        """Code only: move all but the last ``window`` turns into the memory and save it.
        Returns (the memory, the summary before, the turns just folded, the turns kept),
        or None when no fold was due (or the session is gone)."""
        await self._settled(session_id)
        memory = await self.store.load_memory(session_id) or SessionMemory()
        turns = whole_turns(await self.store.messages(session_id))
        if not turns or turns[-1][0] - memory.covered_turn < self.policy.due_after:
            return None
        target = turns[-1][0] - self.policy.window
        newly = [chat for number, chat in turns if memory.covered_turn < number <= target]
        facts = merge_facts(
            memory.facts,
            (m for turn in newly for m in turn),
            order_pattern=self.policy.order_pattern,
            order_example=self.policy.order_example,
        )
        quotes = extractive_summary(
            (m for number, chat in turns if number <= target for m in chat),
            max_tokens=self.policy.summary_tokens,
            order_pattern=self.policy.order_pattern,
            order_example=self.policy.order_example,
            skip=facts.get("opening", ()),
        )
        folded = SessionMemory(quotes, facts, target, time.time())
        if not await self.store.save_memory(session_id, folded):
            return None  # the session was deleted meanwhile
        self.folds += 1
        kept = [chat for number, chat in turns if number > target]
        return folded, memory.summary, newly, kept

    async def _engine_work(self, session_id: str, work: Awaitable[T]) -> T | None:
        """``work``, or None when a newer fold made it pointless (``turn_ended``)."""
        task = asyncio.ensure_future(work)
        self._waits[session_id] = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and not (current is not None and current.cancelling()):
                return None  # superseded, not shut down
            raise
        finally:
            self._waits.pop(session_id, None)

    async def _warm(
        self, session_id: str, memory: SessionMemory, kept: Sequence[Sequence[ChatMessage]]
    ) -> None:
        """Prefill the next prompt's new start (persona + memory + the turns kept), so
        the prefix cache has it: the turn after a fold then prefills only its message,
        like the turns between folds. Not while customers queue for the engine: they
        would wait behind it, and the next turn may come after the cache moved on."""
        if self.engine.stats().waiting:
            return
        try:
            await prefill_next_prompt(
                self.engine,
                persona=self.policy.persona,
                memory=memory,
                turns=kept,
                request_id="summary-warm",
                routing_key=session_id,
            )
        except Exception as exc:  # only a cache miss for the next turn
            log.info("next prompt not prefilled: %s", exc)

    async def _model_summary(
        self, previous: str, turns: Sequence[Sequence[ChatMessage]]
    ) -> str | None:
        """The model's summary of ``previous`` and ``turns``; None when it failed or was
        late (logged and counted: the quotes stay)."""
        started = time.perf_counter()
        try:
            return await asyncio.wait_for(self._summarise(previous, turns), self.policy.timeout)
        except Exception as exc:
            self.failures += 1
            log.warning("model summary not made: %s", str(exc) or type(exc).__name__)
            return None
        finally:
            self.summary_seconds += time.perf_counter() - started

    async def _summarise(self, previous: str, turns: Sequence[Sequence[ChatMessage]]) -> str:
        words = max(20, self.policy.summary_tokens * 3 // 4)
        request = GenerationRequest(
            messages=summary_prompt(previous, turns, words),
            sampling=SamplingParams(max_tokens=self.policy.summary_tokens, temperature=0),
            request_id="summary",
            background=True,
            keep_prefix=False,  # nobody sends this prompt again
        )
        parts: list[str] = []
        async for event in self.engine.generate(request):
            if isinstance(event, Finished):
                break
            parts.append(event.text)
        return "".join(parts).strip()


def whole_turns(
    stored: Sequence[StoredMessage], sent_after: int | None = None, *, as_system: bool = False
) -> list[tuple[int, list[ChatMessage]]]:
    """(turn number, its messages) for every turn that got a reply, oldest first. A turn
    numbered above ``sent_after`` is as the model read it: its message with the knowledge
    base's entries it was sent with (``as_system``: see ``context.with_knowledge``), so the
    prompt repeats what the engine's KV holds."""
    result = []
    for number, group in groupby(stored, key=lambda m: m.turn):
        messages = [m for m in group if m.content.strip()]
        replies = [m for m in messages if m.role == "assistant"]
        if not replies:
            continue
        knowledge = sent_knowledge(replies[-1].meta)
        if sent_after is None or number <= sent_after or not knowledge:
            result.append((number, [m.as_chat() for m in messages]))
            continue
        chat = [
            sent
            for m in messages
            for sent in (
                with_knowledge(m.content, knowledge, as_system=as_system)
                if m.role == "user"
                else [m.as_chat()]
            )
        ]
        result.append((number, chat))
    return result


def sent_knowledge(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """The entries a turn's message was sent with (the reply's ``knowledge``); [] for a turn
    that had none, or was stored before turns kept them."""
    entries = meta.get("knowledge")
    if not isinstance(entries, list):
        return []
    return [
        (str(entry[0]), str(entry[1]))
        for entry in entries
        if isinstance(entry, list | tuple) and len(entry) == 2
    ]
