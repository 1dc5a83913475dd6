"""Continuous batching on llama.cpp: one thread, one context, many sequences per decode.

Every step decodes one token for each running sequence plus a slice of prompt
for sequences being prefilled, within ``step_tokens`` (chunked prefill: a long
prompt never stalls everyone else's decoding for long). New sequences join at
the next step; finished or cancelled ones leave at once. Each slot has a KV
stream of its own; a finished sequence's KV stays behind in it (and a copy in
host memory), so the next prompt that starts the same way prefills only what is
new (``prefix_cache.py``). ``llama_decode`` releases the GIL, so the event loop
serves sockets meanwhile.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
import time
from collections import deque

import llama_cpp

from kefu.engine.base import EngineStats, FinishReason, TokenDelta
from kefu.engine.bundled import ModelLoadError
from kefu.engine.llamacpp.model import LlamaModel
from kefu.engine.llamacpp.prefix_cache import PrefixCache
from kefu.engine.llamacpp.sequence import Outcome, Sequence
from kefu.errors import EngineError
from kefu.threads import lower_priority

log = logging.getLogger("kefu.engine")

DECODE_OK = 0
# Prompt tokens all background sequences together prefill per step (steps with no
# customer): a customer who arrives meanwhile waits for one such short step at most.
BACKGROUND_SLICE = 32


class Scheduler:
    def __init__(
        self,
        model: LlamaModel,
        *,
        slots: int,
        context_size: int,
        step_tokens: int,
        threads: int,
        cache_entries: int,
        nice: int = 0,
    ) -> None:
        self.model = model
        self.nice = nice
        self.slots = slots
        self.context_size = context_size
        # llama.cpp asserts (aborting the process) when a batch is smaller than n_seq_max.
        self.step_tokens = max(step_tokens, slots)
        params = llama_cpp.llama_context_default_params()
        # A KV stream per slot, of context_size cells each: a decode attends over its own
        # stream only, not over every sequence's cells and every kept prefix.
        params.n_ctx = slots * context_size
        params.n_seq_max = slots
        params.kv_unified = False
        params.n_batch = self.step_tokens
        params.n_ubatch = self.step_tokens
        params.n_threads = threads
        params.n_threads_batch = threads
        params.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(model.ptr, params)
        if not self.ctx:
            raise ModelLoadError("llama.cpp could not create a context (out of memory?)")
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(self.step_tokens, 0, 1)
        # Host copies of half the pool's tokens: every slot's conversation fits (8
        # conversations of ~700 tokens did not fit a quarter, and LRU then evicted each one
        # just before its next turn).
        self.cache = PrefixCache(slots, cache_entries, token_budget=params.n_ctx // 2)
        self._pending: deque[Sequence] = deque()
        self._active: list[Sequence] = []
        self._in_batch: list[Sequence] = []  # sequences with tokens in the current batch
        self._outgoing: list[tuple[asyncio.Queue[Outcome], Outcome]] = []  # this step's events
        self._cond = threading.Condition()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="kefu-engine", daemon=True)

    # --- called from the event loop -------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread.start()

    def submit(self, seq: Sequence) -> None:
        with self._cond:
            if self._stopping:
                raise EngineError("the engine is shutting down")
            self._pending.append(seq)
            self._cond.notify()

    def cancel(self, seq: Sequence) -> None:
        with self._cond:
            seq.cancelled = True
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stats(self) -> EngineStats:
        active = list(self._active)
        cache = self.cache.stats
        return EngineStats(
            running=len(active),
            background=sum(seq.request.background for seq in active),
            waiting=len(self._pending),
            slots=self.slots,
            kv_used_cells=sum(seq.n_past for seq in active),
            kv_total_cells=self.slots * self.context_size,
            prefix_cache_entries=len(self.cache.saved),
            prefix_cache_tokens=self.cache.cached_tokens,
            prefix_lookups=cache.lookups,
            prefix_hits=cache.hits,
            prefix_restores=cache.restores,
            prefix_reused_tokens=cache.reused_tokens,
            prompt_tokens=cache.prompt_tokens,
        )

    # --- the engine thread ----------------------------------------------------------

    def _run(self) -> None:
        error = EngineError("the engine stopped")
        # Decode yields the CPU to the event loop and the fast path: a knowledge-base
        # answer must not wait behind a decode step. llama.cpp's OpenMP team, started
        # from this thread, inherits the niceness.
        lower_priority(self.nice, "the decode threads")
        try:
            while True:
                with self._cond:
                    while not (self._stopping or self._pending or self._active):
                        self._cond.wait()
                    if self._stopping:
                        break
                    self._drop_cancelled_pending()
                    self._admit_pending()
                self._step()
                self._flush()
        except BaseException as exc:  # keep the process alive; fail what is in flight
            log.exception("engine thread crashed")
            error = EngineError(f"the engine failed: {exc}")
        finally:
            with self._cond:
                self._stopping = True  # submit() refuses from now on instead of hanging
            for seq in [*self._active, *self._pending]:
                if not seq.done:
                    self._post(seq, error)
                    seq.done = True
                seq.free_sampler()
            self._flush()

    def _drop_cancelled_pending(self) -> None:
        for seq in [s for s in self._pending if s.cancelled]:
            self._pending.remove(seq)
            seq.done = True

    def _admit_pending(self) -> None:
        """Customers first; background work only into a slot no customer waits for, and it
        gives its slot up (failing) when a customer would otherwise wait."""
        customers = [seq for seq in self._pending if not seq.request.background]
        for seq in customers:
            if len(self._active) >= self.slots:
                self._preempt_background()
            if len(self._active) >= self.slots:
                break
            self._pending.remove(seq)
            self._admit_or_fail(seq)
        if any(not seq.request.background for seq in self._pending):
            return
        while self._pending and len(self._active) < self.slots:
            self._admit_or_fail(self._pending.popleft())

    def _preempt_background(self) -> None:
        victim = next((seq for seq in self._active if seq.request.background), None)
        if victim is not None:
            self._post(victim, EngineError("background work gave its slot to a customer"))
            self._release(victim, keep_kv=False)

    def _clear(self, stream: int) -> None:
        llama_cpp.llama_memory_seq_rm(self.memory, stream, -1, -1)
        self.cache.end(stream, ())

    def _admit_or_fail(self, seq: Sequence) -> None:
        try:
            self._admit(seq)
        except Exception as exc:  # fail this request, keep serving the others
            log.exception("could not start sequence %s", seq.request.request_id)
            self._post(seq, EngineError(f"could not start generation: {exc}"))
            seq.done = True
            seq.free_sampler()
            if seq in self._active:
                self._active.remove(seq)
            if seq.slot >= 0:
                self._clear(seq.slot)

    def _admit(self, seq: Sequence) -> None:
        start = self.cache.start(seq.prompt)
        seq.slot = start.stream
        if start.restore is not None:
            self._restore(start.stream, start.restore.state)
        # What the stream holds past the shared prefix is another conversation's.
        llama_cpp.llama_memory_seq_rm(self.memory, start.stream, start.reuse, -1)
        seq.n_past = seq.reused = start.reuse
        seq.make_sampler()
        self._active.append(seq)

    def _restore(self, stream: int, state: bytes) -> None:
        llama_cpp.llama_memory_seq_rm(self.memory, stream, -1, -1)
        # llama.cpp only reads it: the bytes themselves, not a copy of megabytes.
        source = ctypes.cast(ctypes.c_char_p(state), ctypes.POINTER(ctypes.c_uint8))
        if llama_cpp.llama_state_seq_set_data(self.ctx, source, len(state), stream) == 0:
            raise EngineError("could not restore a kept prefix into its KV stream")

    def _save(self, stream: int) -> bytes:
        size = llama_cpp.llama_state_seq_get_size(self.ctx, stream)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self.ctx, buffer, size, stream)
        return ctypes.string_at(buffer, written)

    def _release(self, seq: Sequence, *, keep_kv: bool) -> None:
        seq.done = True
        seq.free_sampler()
        self._active.remove(seq)
        if not keep_kv or seq.n_past == 0:
            self._clear(seq.slot)
            return
        kept = tuple(seq.tokens[: seq.n_past])
        self.cache.end(seq.slot, kept)
        if self.cache.worth_saving(kept, pinned=seq.pin_prefix):
            self.cache.save(kept, self._save(seq.slot), pinned=seq.pin_prefix)

    def _step(self) -> None:
        for seq in [s for s in self._active if s.cancelled]:
            self._release(seq, keep_kv=seq.request.keep_prefix)
        outputs = self._fill_batch()
        if self.batch.n_tokens == 0:
            return  # a step may hold only a prompt slice, with no logits: it still decodes
        status = llama_cpp.llama_decode(self.ctx, self.batch)
        if status != DECODE_OK:
            self._fail_batch(status)
            return
        for seq, index in outputs:
            try:
                self._sample(seq, index)
            except Exception as exc:  # one bad sequence must not take the others down
                log.exception("sequence %s failed", seq.request.request_id)
                self._post(seq, EngineError(f"generation failed: {exc}"))
                self._release(seq, keep_kv=False)

    def _fill_batch(self) -> list[tuple[Sequence, int]]:
        """Decoding sequences first (one token each), then prompt slices within the budget,
        first come first served; written to the batch in stream order.

        Returns the sequences that get logits this step, with their batch index.
        ``n_past`` advances here, so a failed decode fails every sequence in the batch.
        """
        self.batch.n_tokens = 0
        self._in_batch = []
        budget = self.step_tokens
        # Background sequences pause (keeping their KV) while any customer is in the
        # engine or waiting for it: decoding beside customers, eight summaries made every
        # customer's step twice as wide, and the turns after a fold queued behind them.
        running = [seq for seq in self._active if not seq.request.background]
        if not running:
            running = self._active
            budget = min(budget, BACKGROUND_SLICE + len(running))
        slices: list[tuple[Sequence, int, bool]] = []  # tokens from each, and its logits
        for seq in running:
            if not seq.prefilling:
                slices.append((seq, 1, True))
                budget -= 1
        now = time.perf_counter()
        for seq in running:
            if budget <= 0:
                break
            if seq.prefilling:
                seq.prefill_started = seq.prefill_started or now
                count = min(budget, len(seq.prompt) - seq.n_past)
                slices.append((seq, count, seq.n_past + count == len(seq.prompt)))
                budget -= count
        # llama.cpp splits a batch into one ubatch per run of consecutive streams, taken
        # in the batch's order: in stream order, streams 0-7 decode as one.
        outputs: list[tuple[Sequence, int]] = []
        for seq, count, logits in sorted(slices, key=lambda piece: piece[0].slot):
            index = self._add(seq, count, logits=logits)
            if logits:
                outputs.append((seq, index))
        return outputs

    def _add(self, seq: Sequence, count: int, *, logits: bool) -> int:
        """Append ``seq.tokens[n_past : n_past + count]``; returns the last token's index."""
        batch = self.batch
        i: int = batch.n_tokens
        for pos in range(seq.n_past, seq.n_past + count):
            batch.token[i] = seq.tokens[pos]
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq.slot
            batch.logits[i] = False
            i += 1
        batch.logits[i - 1] = logits
        batch.n_tokens = i
        seq.n_past += count
        self._in_batch.append(seq)
        return i - 1

    def _sample(self, seq: Sequence, index: int) -> None:
        token = llama_cpp.llama_sampler_sample(seq.sampler, self.ctx, index)
        now = time.perf_counter()
        seq.first_token = seq.first_token or now
        seq.last_token = now
        if self.model.is_end_of_generation(token):
            self._finish(seq, "stop")
            return
        seq.generated += 1
        delta = seq.text.feed(self.model.token_bytes(token))
        if delta:
            self._post(seq, TokenDelta(delta))
        if seq.text.stopped:
            self._finish(seq, "stop")
        elif seq.generated >= seq.max_tokens or seq.n_past + 1 >= self.context_size:
            self._finish(seq, "length")
        else:
            seq.tokens.append(token)

    def _finish(self, seq: Sequence, reason: FinishReason) -> None:
        tail = seq.text.finish()
        if tail:
            self._post(seq, TokenDelta(tail))
        self._post(seq, seq.finished(reason))
        self._release(seq, keep_kv=seq.request.keep_prefix)

    def _fail_batch(self, status: int) -> None:
        error = EngineError(f"llama_decode failed with status {status}")
        log.error("llama_decode returned %d for %d sequences", status, len(self._in_batch))
        for seq in self._in_batch:
            self._post(seq, error)
            self._release(seq, keep_kv=False)

    def _post(self, seq: Sequence, outcome: Outcome) -> None:
        self._outgoing.append((seq.outbox, outcome))

    def _flush(self) -> None:
        """Hand this step's events to the event loop in one wake-up, not one per token."""
        if self._outgoing and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(_deliver, self._outgoing)
        self._outgoing = []


def _deliver(outgoing: list[tuple[asyncio.Queue[Outcome], Outcome]]) -> None:
    for outbox, outcome in outgoing:
        outbox.put_nowait(outcome)
