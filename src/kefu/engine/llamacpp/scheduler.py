"""Continuous batching on llama.cpp: one thread, one context, many sequences per decode.

Every step decodes one token for each running sequence plus a slice of prompt
for sequences being prefilled, within ``step_tokens`` (chunked prefill: a long
prompt never stalls everyone else's decoding for long). New sequences join at
the next step; finished or cancelled ones leave at once and free their KV cells.
``llama_decode`` releases the GIL, so the event loop serves sockets meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque

import llama_cpp

from kefu.engine.base import EngineStats, FinishReason, TokenDelta
from kefu.engine.llamacpp.model import LlamaModel, ModelLoadError
from kefu.engine.llamacpp.sequence import Outcome, Sequence
from kefu.errors import EngineError

log = logging.getLogger("kefu.engine")


class Scheduler:
    def __init__(
        self,
        model: LlamaModel,
        *,
        slots: int,
        context_size: int,
        step_tokens: int,
        threads: int,
    ) -> None:
        self.model = model
        self.slots = slots
        self.context_size = context_size
        self.step_tokens = max(step_tokens, slots)
        params = llama_cpp.llama_context_default_params()
        # One unified KV pool: any sequence may use up to context_size cells, and
        # sharing a prefix between sequences (seq_cp) costs no copy.
        params.n_ctx = slots * context_size
        params.n_seq_max = slots
        params.kv_unified = True
        params.n_batch = self.step_tokens
        params.n_ubatch = self.step_tokens
        params.n_threads = threads
        params.n_threads_batch = threads
        params.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(model.ptr, params)
        if not self.ctx:
            raise ModelLoadError("llama.cpp could not create a context (out of memory?)")
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(self.step_tokens, 0, slots)
        self._free_slots = list(range(slots))
        self._pending: deque[Sequence] = deque()
        self._active: list[Sequence] = []
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
        return EngineStats(
            running=len(self._active),
            waiting=len(self._pending),
            slots=self.slots,
            kv_used_cells=sum(seq.n_past for seq in self._active),
            kv_total_cells=self.slots * self.context_size,
        )

    # --- the engine thread ----------------------------------------------------------

    def _run(self) -> None:
        error = EngineError("the engine stopped")
        try:
            while True:
                with self._cond:
                    while not (self._stopping or self._pending or self._active):
                        self._cond.wait()
                    if self._stopping:
                        break
                    self._drop_cancelled_pending()
                    while self._pending and self._free_slots:
                        self._admit(self._pending.popleft())
                self._step()
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

    def _drop_cancelled_pending(self) -> None:
        for seq in [s for s in self._pending if s.cancelled]:
            self._pending.remove(seq)
            seq.done = True

    def _admit(self, seq: Sequence) -> None:
        seq.slot = self._free_slots.pop()
        seq.make_sampler()
        self._active.append(seq)

    def _release(self, seq: Sequence) -> None:
        seq.done = True
        llama_cpp.llama_memory_seq_rm(self.memory, seq.slot, -1, -1)
        seq.free_sampler()
        self._active.remove(seq)
        self._free_slots.append(seq.slot)

    def _step(self) -> None:
        for seq in [s for s in self._active if s.cancelled]:
            self._release(seq)
        batch = self.batch
        batch.n_tokens = 0
        outputs: list[tuple[Sequence, int]] = []
        budget = self.step_tokens
        for seq in self._active:
            if not seq.prefilling:
                outputs.append((seq, batch.n_tokens))
                self._add(seq.next_token, seq.n_past, seq.slot, True)
                seq.n_past += 1
                budget -= 1
        now = time.perf_counter()
        for seq in self._active:
            if budget <= 0:
                break
            if not seq.prefilling:
                continue
            seq.prefill_started = seq.prefill_started or now
            chunk = seq.prompt[seq.n_past : seq.n_past + budget]
            last = len(seq.prompt) - 1
            for offset, token in enumerate(chunk):
                pos = seq.n_past + offset
                if pos == last:
                    outputs.append((seq, batch.n_tokens))
                self._add(token, pos, seq.slot, pos == last)
            seq.n_past += len(chunk)
            budget -= len(chunk)
        if batch.n_tokens == 0:
            return
        status = llama_cpp.llama_decode(self.ctx, batch)
        if status != 0:
            self._fail_batch(status)
            return
        for seq, index in outputs:
            try:
                self._sample(seq, index)
            except Exception as exc:  # one bad sequence must not take the others down
                log.exception("sequence %s failed", seq.request.request_id)
                self._post(seq, EngineError(f"generation failed: {exc}"))
                self._release(seq)

    def _add(self, token: int, pos: int, slot: int, logits: bool) -> None:
        batch = self.batch
        i = batch.n_tokens
        batch.token[i] = token
        batch.pos[i] = pos
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = slot
        batch.logits[i] = logits
        batch.n_tokens = i + 1

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
            seq.next_token = token

    def _finish(self, seq: Sequence, reason: FinishReason) -> None:
        tail = seq.text.finish()
        if tail:
            self._post(seq, TokenDelta(tail))
        self._post(seq, seq.finished(reason))
        self._release(seq)

    def _fail_batch(self, status: int) -> None:
        # 1 = no KV cells free; < 0 = a hard error. Either way this batch is lost.
        error = EngineError(f"llama_decode failed with status {status}")
        log.error("llama_decode returned %d with %d sequences", status, len(self._active))
        for seq in list(self._active):
            self._post(seq, error)
            self._release(seq)

    def _post(self, seq: Sequence, outcome: Outcome) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(seq.outbox.put_nowait, outcome)
