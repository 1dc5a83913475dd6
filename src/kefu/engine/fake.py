"""FakeEngine: deterministic text with configurable delays, for HTTP tests and overhead benchmarks.

It never pretends to be a model: its replies say they are fake, and it is only
chosen with ``--engine fake``. A "token" here is one whitespace-separated word.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence

from kefu.engine.base import (
    ChatMessage,
    EngineStats,
    EngineTimings,
    Finished,
    FinishReason,
    GenerationEvent,
    GenerationRequest,
    TokenDelta,
    Usage,
)
from kefu.engine.text import StreamText
from kefu.errors import ContextLengthExceeded, EngineNotReady

# Tokens a chat template adds around each message, so budgets behave like a real model's.
TEMPLATE_TOKENS_PER_MESSAGE = 3


def _words(text: str) -> list[str]:
    return text.split()


class FakeEngine:
    """A stand-in engine whose reply is ``fake reply to: <last user message>`` word by word."""

    # It renders no template, so any role order does; /chat sends a message's passages as a
    # system message before it, and the last user message stays the customer's words.
    system_between_turns = True
    # It answers at once and holds no slot: speculative work takes nothing from anyone.
    background_in_idle_steps = True

    def __init__(
        self,
        *,
        token_delay: float = 0.0,
        prefill_delay: float = 0.0,
        context_window: int = 2048,
        model_id: str = "fake-engine",
        reply_words: int | None = None,
        slots: int = 1,
    ) -> None:
        self.model_id = model_id
        self.context_window = context_window
        self.token_delay = token_delay
        self.prefill_delay = prefill_delay
        self.reply_words = reply_words
        self.slots = slots  # reported only: admission decides how many run at once
        self.started = False
        self.cancelled = 0
        self.requests: list[GenerationRequest] = []
        self._running = 0
        self._background = 0  # of those running

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(len(_words(m.content)) + TEMPLATE_TOKENS_PER_MESSAGE for m in messages)

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.started = False

    def stats(self) -> EngineStats:
        return EngineStats(running=self._running, slots=self.slots, background=self._background)

    def reply_for(self, request: GenerationRequest) -> list[str]:
        last_user = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        words = ["fake", "reply", "to:", *_words(last_user)]
        if self.reply_words is not None:
            words = [f"w{i}" for i in range(self.reply_words)]
        return words

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        if not self.started:
            raise EngineNotReady("the fake engine is not started")
        prompt_tokens = self.count_chat_tokens(request.messages)
        if prompt_tokens >= self.context_window:
            raise ContextLengthExceeded(
                f"prompt is {prompt_tokens} tokens; the context window is {self.context_window}"
            )
        self.requests.append(request)
        queued = time.perf_counter()
        self._running += 1
        self._background += request.background
        finished = False
        try:
            if self.prefill_delay:
                await asyncio.sleep(self.prefill_delay)
            prefill_started = queued
            words = self.reply_for(request)
            budget = min(request.sampling.max_tokens, self.context_window - prompt_tokens)
            finish: FinishReason = "stop"
            if len(words) > budget:
                words, finish = words[:budget], "length"
            text = StreamText(request.sampling.stop)  # the same stop handling as llama.cpp's
            first_token: float | None = None
            sent = 0
            for i, word in enumerate(words):
                if self.token_delay:
                    await asyncio.sleep(self.token_delay)
                sent += 1
                delta = text.feed((word if i == 0 else " " + word).encode())
                if delta:
                    first_token = first_token or time.perf_counter()
                    yield TokenDelta(delta)
                if text.stopped:
                    finish = "stop"
                    break
            if tail := text.finish():
                yield TokenDelta(tail)
            now = time.perf_counter()
            finished = True
            yield Finished(
                finish_reason=finish,
                usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=sent),
                timings=EngineTimings(
                    queued=queued,
                    prefill_started=prefill_started,
                    first_token=first_token or now,
                    last_token=now,
                ),
            )
        finally:
            self._running -= 1
            self._background -= request.background
            if not finished:
                self.cancelled += 1
