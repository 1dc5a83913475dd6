"""The rolling summary, built in the background after a turn's reply went out.

After each turn the keeper is told the session moved on. When more than
``window + every`` turns are not yet in the memory, it folds all but the last
``window`` of them into the summary and the facts, so the reply's prompt stays
``memory + the turns since`` and only changes shape once every ``every`` turns
(between updates it grows by appending, which the prefix cache reuses).

Work is coalesced per session: one job at a time, and a turn that ends while a job
runs asks for one more pass afterwards, not for a job of its own. The summary is a
``background`` request: the embedded engine runs it only while no customer waits;
so is prefilling the next prompt's new start, so the prefix cache has it.
A summary that fails or runs past ``timeout`` is logged and dropped; the facts read by
code are kept anyway, and the turns are folded again at the next turn. Nothing here
can fail a customer's turn: the reply was already sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from itertools import groupby

from kefu.engine.base import ChatMessage, Engine, Finished, GenerationRequest, SamplingParams
from kefu.memory.facts import merge_facts
from kefu.memory.render import memory_block, summary_prompt
from kefu.service.context import system_prompt
from kefu.store.base import SessionMemory, SessionStore, StoredMessage

log = logging.getLogger("kefu.memory")


@dataclass(frozen=True, slots=True)
class MemoryPolicy:
    window: int  # turns kept verbatim after an update (--history-turns)
    every: int  # turns between updates (--memory-every)
    summary_tokens: int  # the summary's length cap (--summary-tokens)
    timeout: float  # seconds one update may take (--summary-timeout)
    order_pattern: str
    order_example: str
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
        # Counters for the docs' "engine time per turn" and the benchmark.
        self.updates = 0
        self.failures = 0
        self.summary_seconds = 0.0

    def turn_ended(self, session_id: str, turn: int, covered_turn: int) -> None:
        """Called after each turn, with what the prompt's memory covered; cheap when not due."""
        if turn - covered_turn < self.policy.due_after:
            return
        if session_id in self._jobs:
            self._again.add(session_id)
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
        """Fold the turns that left the window; None when none had to."""
        await self._settled(session_id)
        memory = await self.store.load_memory(session_id) or SessionMemory()
        turns = whole_turns(await self.store.messages(session_id))
        if not turns or turns[-1][0] - memory.covered_turn < self.policy.due_after:
            return None
        target = turns[-1][0] - self.policy.window
        folded = [chat for number, chat in turns if memory.covered_turn < number <= target]
        facts = merge_facts(
            memory.facts,
            (m for turn in folded for m in turn),
            order_pattern=self.policy.order_pattern,
            order_example=self.policy.order_example,
        )
        started = time.perf_counter()
        try:
            summary = await asyncio.wait_for(
                self._summarise(session_id, memory.summary, folded), self.policy.timeout
            )
        except Exception:
            # Keep what code read; the same turns are folded again next time.
            kept = SessionMemory(memory.summary, facts, memory.covered_turn, time.time())
            if facts != memory.facts:
                await self.store.save_memory(session_id, kept)
            raise
        finally:
            self.summary_seconds += time.perf_counter() - started
        updated = SessionMemory(summary, facts, target, time.time())
        if not await self.store.save_memory(session_id, updated):
            return None  # the session was deleted meanwhile
        self.updates += 1
        verbatim = [chat for number, chat in turns if number > target]
        await self._warm(session_id, updated, verbatim)
        return updated

    async def _warm(
        self, session_id: str, memory: SessionMemory, kept: Sequence[Sequence[ChatMessage]]
    ) -> None:
        """Prefill the next prompt's new start (persona + memory + the turns kept) in the
        background, so the prefix cache has it: the turn after an update then prefills
        only its message, like the turns between updates."""
        system = ChatMessage("system", system_prompt(self.policy.persona, (), memory_block(memory)))
        request = GenerationRequest(
            messages=[system, *(m for turn in kept for m in turn)],
            sampling=SamplingParams(max_tokens=1, temperature=0),
            request_id="summary-warm",
            routing_key=session_id,  # a pool keeps it on the engine the session's turns use
            background=True,
        )
        try:
            async for _ in self.engine.generate(request):
                pass
        except Exception as exc:  # only a cache miss for the next turn
            log.info("next prompt not prefilled: %s", exc)

    async def _summarise(
        self, session_id: str, previous: str, turns: Sequence[Sequence[ChatMessage]]
    ) -> str:
        words = max(20, self.policy.summary_tokens * 3 // 4)
        request = GenerationRequest(
            messages=summary_prompt(previous, turns, words),
            sampling=SamplingParams(max_tokens=self.policy.summary_tokens, temperature=0),
            request_id="summary",
            routing_key=session_id,
            background=True,
        )
        parts: list[str] = []
        async for event in self.engine.generate(request):
            if isinstance(event, Finished):
                break
            parts.append(event.text)
        summary = "".join(parts).strip()
        return summary or previous


def whole_turns(stored: Sequence[StoredMessage]) -> list[tuple[int, list[ChatMessage]]]:
    """(turn number, its messages) for every turn that got a reply, oldest first."""
    result = []
    for number, group in groupby(stored, key=lambda m: m.turn):
        messages = [m for m in group if m.content.strip()]
        if any(m.role == "assistant" for m in messages):
            result.append((number, [m.as_chat() for m in messages]))
    return result
