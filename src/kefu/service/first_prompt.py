"""A first turn's prompt read before /ready, twice: the embedded engine's warm-up, and
admission's first measure of how fast the warm engine reads.

A first turn's prompt is the persona, then the message with the first ``--kb-passages``
entries of this shop's knowledge base. The first read is cold (0.7-3.8 s on the 2-core box for a
prompt a warm engine reads in tens of milliseconds): admission once predicted from it and
refused 31 of 32 requests a fresh server then served well inside the SLO, so it is only
logged. The second read, warm, carries the passages in the other order, so the prefix
cache keeps the persona and the engine reads the rest anew: a sample of the warm reading
speed, which admission's line of reading time starts from (``limits/rates.py``). Without
one, a fresh server's opening burst was estimated at nothing and its first prompts, read
one after another, started 4-6 s late. A sample is no outcome: nothing is refused on it
before outcomes have calibrated the predictions (``limits/outcomes.py``).

Only for the embedded engine: a remote engine warms itself; the fake engines are for
tests of the HTTP layer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kefu.engine.base import (
    Engine,
    Finished,
    GenerationRequest,
    SamplingParams,
    system_between_turns,
    unread_tokens,
)
from kefu.memory.context import build_context

log = logging.getLogger("kefu.service")

QUESTION = "Hello, I have a question about my order, can you help me?"


@dataclass(frozen=True, slots=True)
class Reading:
    tokens: int  # left to read: what the prefix cache did not hold
    seconds: float  # to the first token


async def read_first_prompts(
    engine: Engine, *, persona: str, passages: Sequence[tuple[str, str]]
) -> Reading:
    """Read a first turn's prompt cold, then warm with its passages the other way round;
    the warm reading."""
    cold = await read_a_prompt(engine, persona, passages)
    warm = await read_a_prompt(engine, persona, passages[::-1])
    log.info(
        "read a first turn's prompt (%d passages): %d tokens in %.2f s cold, %d in %.2f s warm",
        len(passages),
        cold.tokens,
        cold.seconds,
        warm.tokens,
        warm.seconds,
    )
    return warm


async def read_a_prompt(
    engine: Engine, persona: str, passages: Sequence[tuple[str, str]]
) -> Reading:
    """A first turn's prompt, read with a one-token reply: its tokens left to read, and the
    seconds to that token."""
    built = build_context(
        persona=persona,
        knowledge=passages,
        history=[],
        message=QUESTION,
        tokenizer=engine,
        budget=engine.context_window // 2,
        knowledge_as_system=system_between_turns(engine),
    )
    request = GenerationRequest(
        messages=built.messages,
        sampling=SamplingParams(max_tokens=1, temperature=0),
        request_id="first-prompt",
    )
    unread = unread_tokens(engine, built.messages, built.prompt_tokens)
    started = time.perf_counter()
    seconds: float | None = None
    async for event in engine.generate(request):
        if seconds is None and not isinstance(event, Finished):
            seconds = time.perf_counter() - started
    if seconds is None:  # a reply with no token: its end is when the prompt was read
        seconds = time.perf_counter() - started
    return Reading(unread, seconds)
