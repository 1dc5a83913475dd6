"""The embedded engine on the real bundled model, in process: batching, reuse, isolation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from kefu.engine.base import (
    ChatMessage,
    Finished,
    GenerationRequest,
    SamplingParams,
    TokenDelta,
    unread_tokens,
)
from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.engine import LlamaCppEngine
from kefu.engine.llamacpp.model import LlamaModel
from kefu.engine.llamacpp.scheduler import Scheduler
from kefu.engine.llamacpp.sequence import Sequence as EngineSequence
from kefu.engine.text import StreamText
from kefu.errors import ContextLengthExceeded, EngineError

pytestmark = [pytest.mark.model, pytest.mark.anyio]

PERSONA = ChatMessage("system", "You are a helpful shop assistant. Answer briefly.")
QUESTIONS = [
    "How do I return a pair of shoes?",
    "What is your refund policy?",
    "Do you ship to Canada?",
    "Where is my order 12345?",
    "Can I change my delivery address?",
    "我的包裹在哪里？",
    "Do you sell gift cards?",
    "How long does delivery take?",
]


def greedy(question: str, max_tokens: int = 24, **sampling: Any) -> GenerationRequest:
    return GenerationRequest(
        messages=[PERSONA, ChatMessage("user", question)],
        sampling=SamplingParams(max_tokens=max_tokens, temperature=0, **sampling),
        request_id=question,
    )


@asynccontextmanager
async def engine(**options: Any) -> AsyncIterator[LlamaCppEngine]:
    options.setdefault("threads", 2)
    instance = LlamaCppEngine(**options)
    await instance.start()
    try:
        yield instance
    finally:
        await instance.close()


async def run(e: LlamaCppEngine, request: GenerationRequest) -> tuple[list[str], Finished]:
    deltas: list[str] = []
    async for event in e.generate(request):
        if isinstance(event, TokenDelta):
            deltas.append(event.text)
        else:
            return deltas, event
    raise AssertionError("no Finished event")


async def wait_idle(e: LlamaCppEngine) -> None:
    for _ in range(500):
        if e.stats().running == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"engine still busy: {e.stats()}")


async def scheduled_together(requests: list[GenerationRequest]) -> list[list[str]]:
    """Greedy deltas of requests that all enter the scheduler's first step together.

    Submitting before the engine thread starts fixes the batch composition, which
    the engine's own timing would otherwise decide.
    """
    model = LlamaModel(bundled_model_path())
    scheduler = Scheduler(
        model, slots=8, context_size=512, step_tokens=512, threads=2, cache_entries=0
    )
    sequences = [
        EngineSequence(r, model.chat_tokens(r.messages), r.sampling.max_tokens, asyncio.Queue())
        for r in requests
    ]
    for seq in sequences:
        scheduler.submit(seq)
    scheduler.start(asyncio.get_running_loop())
    results = []
    try:
        for seq in sequences:
            deltas = []
            while not isinstance(outcome := await seq.outbox.get(), Finished):
                assert isinstance(outcome, TokenDelta), outcome
                deltas.append(outcome.text)
            results.append(deltas)
    finally:
        scheduler.stop()
        model.close()
    return results


async def test_greedy_alone_and_batched_with_seven_others() -> None:
    # llama.cpp's CPU kernels depend on the batch size: a sequence's logits differ by up
    # to ~1.0 between decoding alone and with seven others (docs/ARCHITECTURE.md), so a
    # greedy continuation may take another path after a near tie. What holds, and is
    # checked: the first token agrees, and a batch of the same composition is
    # reproduced token for token.
    requests = [greedy(q, max_tokens=16) for q in QUESTIONS]
    batched = await scheduled_together(requests)
    again = await scheduled_together(requests)
    assert batched == again
    for request, together in zip(requests, batched, strict=True):
        (alone,) = await scheduled_together([request])
        assert alone, request.request_id
        assert together[0] == alone[0], request.request_id


async def test_prefix_reuse_skips_the_persona_and_the_previous_turn() -> None:
    async with engine(cache_entries=8, shared_prefix=[PERSONA]) as e:
        first_turn = greedy("Do you ship to Canada?", max_tokens=16)
        reply, done1 = await run(e, first_turn)
        # The persona was prefilled at start: even the first request reuses it.
        assert done1.usage.cached_prompt_tokens >= 10
        second_turn = GenerationRequest(
            messages=[
                PERSONA,
                ChatMessage("user", "Do you ship to Canada?"),
                ChatMessage("assistant", "".join(reply)),
                ChatMessage("user", "And to Mexico?"),
            ],
            sampling=SamplingParams(max_tokens=8, temperature=0),
        )
        # What admission is told before the prompt is read, without counting a lookup:
        # the tokens the engine will reuse, as it then reports them.
        lookups = e.stats().prefix_lookups
        told = e.reusable_prompt_tokens(second_turn.messages)
        assert e.stats().prefix_lookups == lookups
        prompt_tokens = e.count_chat_tokens(second_turn.messages)
        assert unread_tokens(e, second_turn.messages, prompt_tokens) == prompt_tokens - told
        _, done2 = await run(e, second_turn)
        assert told == done2.usage.cached_prompt_tokens
        stats = e.stats()
    # The second turn reuses the whole first turn, not just the persona.
    assert done2.usage.cached_prompt_tokens > done1.usage.prompt_tokens
    assert done2.usage.cached_prompt_tokens < done2.usage.prompt_tokens
    assert stats.prefix_hits >= 2
    assert stats.prefix_reused_tokens >= done1.usage.cached_prompt_tokens


async def test_a_conversation_whose_stream_went_to_another_is_restored_from_its_copy() -> None:
    """One slot: between a conversation's two turns another customer takes its KV stream.
    The next turn's KV comes back from the host copy, byte for byte what the stream had
    kept: the greedy reply is the one it gets when nobody came between."""
    first = greedy("Do you ship to Canada?", max_tokens=12)

    async def second_turn(e: LlamaCppEngine, *, between: bool) -> tuple[list[str], Finished]:
        reply, _ = await run(e, first)
        if between:
            await run(e, greedy("我的包裹在哪里？", max_tokens=12))
        follow_up = GenerationRequest(
            messages=[
                *first.messages,
                ChatMessage("assistant", "".join(reply)),
                ChatMessage("user", "And to Mexico?"),
            ],
            sampling=SamplingParams(max_tokens=12, temperature=0),
        )
        return await run(e, follow_up)

    async with engine(slots=1, cache_entries=4) as e:
        kept, kept_done = await second_turn(e, between=False)
        assert e.stats().prefix_restores == 0  # the stream had kept it
    async with engine(slots=1, cache_entries=4) as e:
        restored, restored_done = await second_turn(e, between=True)
        assert e.stats().prefix_restores == 1
    assert restored_done.usage.cached_prompt_tokens == kept_done.usage.cached_prompt_tokens
    assert restored == kept


async def test_cancelling_frees_the_slot_and_its_kv() -> None:
    async with engine(slots=2) as e:
        stream = e.generate(greedy("Tell me a very long story about a parcel.", max_tokens=400))
        async for event in stream:
            assert isinstance(event, TokenDelta)
            break
        assert e.stats().running == 1
        await stream.aclose()
        await wait_idle(e)
        assert e.stats().kv_used_cells == 0
        _deltas, done = await run(e, greedy("Hello", max_tokens=4))
    assert done.usage.completion_tokens > 0


async def test_a_failing_sequence_leaves_the_others_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_feed = StreamText.feed

    def feed(self: StreamText, data: bytes) -> str:
        if "<<boom>>" in self._stops:
            raise RuntimeError("injected failure")
        return real_feed(self, data)

    monkeypatch.setattr(StreamText, "feed", feed)
    async with engine(cache_entries=0) as e:
        good = [run(e, greedy(q, max_tokens=12)) for q in QUESTIONS[:3]]
        bad = run(e, greedy(QUESTIONS[3], max_tokens=12, stop=("<<boom>>",)))
        results = await asyncio.gather(*good, bad, return_exceptions=True)
        assert isinstance(results[-1], EngineError)
        for result in results[:-1]:
            assert not isinstance(result, BaseException)
            _deltas, done = result
            assert done.usage.completion_tokens > 0
        await wait_idle(e)
        _, after = await run(e, greedy("Hello", max_tokens=4))
    assert after.usage.completion_tokens > 0


async def test_max_tokens_and_stop_strings() -> None:
    async with engine() as e:
        _deltas, done = await run(e, greedy(QUESTIONS[0], max_tokens=5))
        assert done.finish_reason == "length"
        assert done.usage.completion_tokens == 5
        full, _ = await run(e, greedy(QUESTIONS[0], max_tokens=24))
        text = "".join(full)
        stop = text.split()[3]  # a word from the middle of the greedy reply
        cut, stopped = await run(e, greedy(QUESTIONS[0], max_tokens=24, stop=(stop,)))
    assert stopped.finish_reason == "stop"
    assert "".join(cut) == text[: text.index(stop)]


async def test_chinese_streams_whole_characters() -> None:
    async with engine() as e:
        deltas, _ = await run(e, greedy("请用中文介绍一下你们的退货政策。", max_tokens=48))
    assert deltas
    assert all("\ufffd" not in d for d in deltas)


async def test_a_prompt_over_the_window_is_refused() -> None:
    async with engine(context_size=256) as e:
        with pytest.raises(ContextLengthExceeded):
            await run(e, greedy("word " * 400))


LONG_MESSAGE = "Here is my order history: " + " ".join(
    f"order KF{n:06d} arrived" for n in range(60)
)


async def test_a_prompt_longer_than_a_step_is_prefilled_in_chunks() -> None:
    async with engine(step_tokens=32) as e:
        request = greedy(LONG_MESSAGE, max_tokens=8)
        assert e.count_chat_tokens(request.messages) > 4 * 32  # several steps of prefill
        deltas, done = await run(e, request)
    assert done.usage.completion_tokens > 0
    assert "".join(deltas)


async def test_a_long_prefill_does_not_stall_a_running_stream() -> None:
    # Chunked prefill: while a long prompt is read 32 tokens a step, the stream that is
    # already decoding still gets a token every step.
    async with engine(step_tokens=32, cache_entries=0) as e:
        short = e.generate(greedy("Tell me a long story about a parcel.", max_tokens=200))
        first = await anext(short)
        assert isinstance(first, TokenDelta)
        long_stream = e.generate(greedy(LONG_MESSAGE, max_tokens=4))
        long_first = asyncio.ensure_future(anext(long_stream))
        tokens_meanwhile = 0
        async for event in short:
            if long_first.done():
                break
            if isinstance(event, TokenDelta):
                tokens_meanwhile += 1
        assert isinstance(await long_first, TokenDelta)
        await short.aclose()
        await long_stream.aclose()
    # The long prompt needs 15+ steps; without chunked prefill the short stream would get
    # at most one token while it is read, with it one per step (a margin for an early stop).
    assert tokens_meanwhile >= 5


def test_the_bundled_template_takes_a_system_message_between_turns() -> None:
    # /chat then sends a message's passages as a system message just before it.
    model = LlamaModel(bundled_model_path())
    try:
        assert model.renders_system_between_turns()
    finally:
        model.close()


def test_a_template_that_rejects_one_is_read_as_such() -> None:
    model = LlamaModel(bundled_model_path())
    try:
        model._formatter = Jinja2ChatFormatter(
            template="{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}"
            "{{ raise_exception('roles must alternate') }}{% endif %}{{ m['content'] }}"
            "{% endfor %}",
            eos_token="</s>",
            bos_token="<s>",
        )
        assert not model.renders_system_between_turns()
    finally:
        model.close()
