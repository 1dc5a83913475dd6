"""One first turn's prompt read before /ready: the embedded engine's warm-up.

The persona and the first ``--kb-passages`` entries of this shop's knowledge base open
every first turn's prompt; read once at start, they are in the prefix cache for the first
customer, and the engine's first real prompt does not pay for cold caches.

Its time is logged, not given to admission: the first read of a fresh process is cold
(0.7-3.8 s on the 2-core box for a prompt a warm engine reads in tens of milliseconds),
and admission predicting from it refused 31 of 32 requests a fresh server then served
well inside the SLO. Admission measures the engine on real requests instead
(``limits/outcomes.py``).

Only for the embedded engine: a remote engine warms itself; the fake engines are for
tests of the HTTP layer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from kefu.engine.base import Engine, Finished, GenerationRequest, SamplingParams, unread_tokens
from kefu.service.context import build_context

log = logging.getLogger("kefu.service")

QUESTION = "Hello, I have a question about my order, can you help me?"


async def read_a_first_prompt(
    engine: Engine, *, persona: str, passages: Sequence[tuple[str, str]]
) -> float:
    """Read a first turn's prompt and reply one token; the seconds to that token."""
    built = build_context(
        persona=persona,
        knowledge=passages,
        history=[],
        message=QUESTION,
        tokenizer=engine,
        budget=engine.context_window // 2,
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
    log.info(
        "read a first turn's prompt (%d passages, %d tokens to read) in %.2f s, cold",
        len(passages),
        unread,
        seconds,
    )
    return seconds
