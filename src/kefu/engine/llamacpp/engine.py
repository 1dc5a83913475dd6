"""LlamaCppEngine: the embedded engine's async face over the scheduler thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

from kefu.engine.base import (
    ChatMessage,
    EngineStats,
    Finished,
    GenerationEvent,
    GenerationRequest,
    SamplingParams,
)
from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.model import LlamaModel
from kefu.engine.llamacpp.prefix_cache import common_prefix_len
from kefu.engine.llamacpp.scheduler import Scheduler
from kefu.engine.llamacpp.sequence import Outcome
from kefu.engine.llamacpp.sequence import Sequence as EngineSequence
from kefu.errors import ContextLengthExceeded, EngineNotReady

WARMUP = GenerationRequest(
    messages=[ChatMessage("user", "Hello")],
    sampling=SamplingParams(max_tokens=4, temperature=0),
    request_id="warmup",
)


class LlamaCppEngine:
    # The scheduler runs background work only in steps with no customer (scheduler.py).
    background_in_idle_steps = True

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        slots: int = 8,
        context_size: int = 2048,
        step_tokens: int = 256,
        threads: int = 2,
        cache_entries: int = 32,
        shared_prefix: Sequence[ChatMessage] = (),
        warmup: bool = True,
        nice: int = 0,
    ) -> None:
        self._nice = nice
        self.model_path = model_path or bundled_model_path()
        self.model_id = self.model_path.name.removesuffix(".gguf")
        self.context_window = context_size
        self._slots = slots
        self._step_tokens = step_tokens
        self._threads = threads
        self._cache_entries = cache_entries
        self._shared_prefix = tuple(shared_prefix)
        self._warmup = warmup
        self._model: LlamaModel | None = None
        self._scheduler: Scheduler | None = None
        # Known once the model's chat template is loaded (engine.base.system_between_turns).
        self.system_between_turns = False

    async def start(self) -> None:
        self._model = await asyncio.to_thread(LlamaModel, self.model_path)
        self.context_window = min(self.context_window, self._model.n_ctx_train)
        self.system_between_turns = self._model.renders_system_between_turns()
        self._scheduler = await asyncio.to_thread(
            Scheduler,
            self._model,
            slots=self._slots,
            context_size=self.context_window,
            step_tokens=self._step_tokens,
            threads=self._threads,
            cache_entries=self._cache_entries,
            nice=self._nice,
        )
        self._scheduler.start(asyncio.get_running_loop())
        if self._warmup:
            async for _ in self.generate(WARMUP):
                pass
        if self._shared_prefix:
            await self._pin_prefix(self._model, self._scheduler)

    async def _pin_prefix(self, model: LlamaModel, scheduler: Scheduler) -> None:
        """Prefill the tokens every prompt starts with (the persona) once, and keep them."""
        first = model.chat_tokens([*self._shared_prefix, ChatMessage("user", "a")])
        second = model.chat_tokens([*self._shared_prefix, ChatMessage("user", "b")])
        prefix = first[: common_prefix_len(first, second)]
        if len(prefix) < 2:
            return
        request = GenerationRequest(
            messages=self._shared_prefix,
            sampling=SamplingParams(max_tokens=1, temperature=0),
            request_id="shared-prefix",
        )
        outbox: asyncio.Queue[Outcome] = asyncio.Queue()
        seq = EngineSequence(request, prefix, 1, outbox)
        seq.pin_prefix = True
        scheduler.submit(seq)
        while not isinstance(outcome := await outbox.get(), Finished):
            if isinstance(outcome, BaseException):
                raise outcome

    async def close(self) -> None:
        if self._scheduler is not None:
            await asyncio.to_thread(self._scheduler.stop)
            self._scheduler = None
        if self._model is not None:
            self._model.close()
            self._model = None

    def stats(self) -> EngineStats:
        if self._scheduler is None:
            return EngineStats(slots=self._slots)
        return self._scheduler.stats()

    def _loaded(self) -> tuple[LlamaModel, Scheduler]:
        if self._model is None or self._scheduler is None or not self._scheduler.alive:
            raise EngineNotReady("the model is not loaded", retry_after=2)
        return self._model, self._scheduler

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        model, _ = self._loaded()
        return len(model.chat_tokens(messages))

    def reusable_prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        model, scheduler = self._loaded()
        return scheduler.cache.reusable(model.chat_tokens(messages))

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        model, scheduler = self._loaded()
        prompt = model.chat_tokens(request.messages)
        room = self.context_window - len(prompt)
        if room < 1:
            raise ContextLengthExceeded(
                f"the prompt is {len(prompt)} tokens; the context window is {self.context_window}",
                param="messages",
            )
        outbox: asyncio.Queue[Outcome] = asyncio.Queue()
        seq = EngineSequence(request, prompt, min(request.sampling.max_tokens, room), outbox)
        scheduler.submit(seq)
        try:
            while True:
                outcome = await outbox.get()
                if isinstance(outcome, BaseException):
                    raise outcome
                yield outcome
                if isinstance(outcome, Finished):
                    return
        finally:
            if not seq.done:
                scheduler.cancel(seq)
