"""One prompt read before /ready: admission's first measure of the engine.

Admission predicts a request's first token from how long the engine took to read the
prompts before it (``limits/admission.py``). A fresh server has read none, so it predicts
nothing, and a burst at start was let into every free slot: on the 2-core box the
embedded engine read the eight prompts one after another and the eighth got its first
token 9 s after it came (bench ``--users 100``, its first second). One prompt the size of
a first turn's (the persona, then ``--kb-passages`` entries of this shop's knowledge base,
then a question), read once at start, gives the estimate its first sample, so the burst's
second prompt is judged by it.

Only for the embedded engine: a remote engine on GPUs reads a prompt in tens of
milliseconds, and its first real request measures it as soon; the fake engines are for
tests of the HTTP layer, which hold their prompts on purpose.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from kefu.engine.base import Engine, Finished, GenerationRequest, SamplingParams, unread_tokens
from kefu.limits.admission import Admission
from kefu.service.context import build_context

log = logging.getLogger("kefu.service")

QUESTION = "Hello, I have a question about my order, can you help me?"


async def time_a_first_prompt(
    engine: Engine,
    admission: Admission,
    *,
    persona: str,
    passages: Sequence[tuple[str, str]],
) -> float:
    """Read a first turn's prompt and reply one token; the seconds to that token, also
    recorded as admission's first prefill sample (per prompt, and against its length)."""
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
    admission.rate.prefill.add(seconds)
    admission.rate.reading.add(unread, seconds)
    log.info(
        "read a first turn's prompt (%d passages, %d tokens to read) in %.2f s",
        len(passages),
        unread,
        seconds,
    )
    return seconds
