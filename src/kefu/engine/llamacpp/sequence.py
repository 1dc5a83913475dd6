"""One request's life inside the scheduler: prompt, KV position, sampler, text, timings."""

from __future__ import annotations

import asyncio
import random
import time

import llama_cpp

from kefu.engine.base import (
    EngineTimings,
    Finished,
    FinishReason,
    GenerationEvent,
    GenerationRequest,
    Usage,
)
from kefu.engine.text import StreamText

# What the scheduler hands to a request's queue: an event, or the error that ends it.
Outcome = GenerationEvent | BaseException

# Candidates kept before top-p: sorting the full vocabulary every token costs milliseconds.
TOP_K = 40


class Sequence:
    """Owned by the scheduler thread, except ``cancelled`` which the event loop sets."""

    def __init__(
        self,
        request: GenerationRequest,
        prompt: tuple[int, ...],
        max_tokens: int,
        outbox: asyncio.Queue[Outcome],
    ) -> None:
        self.request = request
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.outbox = outbox
        self.text = StreamText(request.sampling.stop)
        self.slot = -1  # llama.cpp seq_id once admitted
        # Prompt, then each sampled token; tokens[:n_past] are in the KV cache and
        # tokens[n_past:] are fed in the next steps.
        self.tokens = list(prompt)
        self.n_past = 0
        self.reused = 0  # prompt tokens whose KV came from the prefix cache
        self.generated = 0
        self.pin_prefix = False  # keep this prompt's KV for good (the shared persona)
        self.cancelled = False
        self.done = False
        self.sampler: llama_cpp.llama_sampler_p | None = None
        self.queued = time.perf_counter()
        self.prefill_started: float | None = None
        self.first_token: float | None = None
        self.last_token: float | None = None

    @property
    def prefilling(self) -> bool:
        return self.n_past < len(self.prompt)

    def make_sampler(self) -> None:
        params = self.request.sampling
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        if params.temperature <= 0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            seed = params.seed if params.seed is not None else random.getrandbits(32)
            for sampler in (
                llama_cpp.llama_sampler_init_top_k(TOP_K),
                llama_cpp.llama_sampler_init_top_p(params.top_p, 1),
                llama_cpp.llama_sampler_init_temp(params.temperature),
                llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF),
            ):
                llama_cpp.llama_sampler_chain_add(chain, sampler)
        self.sampler = chain

    def free_sampler(self) -> None:
        if self.sampler is not None:
            llama_cpp.llama_sampler_free(self.sampler)
            self.sampler = None

    def finished(self, reason: FinishReason) -> Finished:
        return Finished(
            finish_reason=reason,
            usage=Usage(
                prompt_tokens=len(self.prompt),
                completion_tokens=self.generated,
                cached_prompt_tokens=self.reused,
            ),
            timings=EngineTimings(
                queued=self.queued,
                prefill_started=self.prefill_started,
                first_token=self.first_token,
                last_token=self.last_token,
            ),
        )
