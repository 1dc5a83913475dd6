"""Background work on the real scheduler: it never runs ahead of a waiting customer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import replace

import pytest

from kefu.engine.base import (
    ChatMessage,
    Finished,
    GenerationEvent,
    GenerationRequest,
    SamplingParams,
    TokenDelta,
)
from kefu.engine.llamacpp.engine import LlamaCppEngine
from kefu.errors import EngineError

pytestmark = [pytest.mark.model, pytest.mark.anyio]

LONG = "Summarise: " + " ".join(f"The customer asked about order LH-10{i:04d}." for i in range(12))


def request(
    text: str, *, background: bool, max_tokens: int, keep_prefix: bool = True
) -> GenerationRequest:
    return GenerationRequest(
        messages=[ChatMessage("user", text)],
        sampling=SamplingParams(max_tokens=max_tokens, temperature=0),
        request_id="summary" if background else "customer",
        background=background,
        keep_prefix=keep_prefix,
    )


async def finish(e: LlamaCppEngine, r: GenerationRequest) -> Finished:
    async for event in e.generate(r):
        if isinstance(event, Finished):
            return event
    raise AssertionError("no Finished event")


async def rest(events: AsyncGenerator[GenerationEvent, None]) -> Finished:
    async for event in events:
        if isinstance(event, Finished):
            return event
    raise AssertionError("no Finished event")


async def test_a_customer_is_served_before_background_work_submitted_first() -> None:
    e = LlamaCppEngine(slots=2, threads=2, warmup=False)
    await e.start()
    try:
        summary = asyncio.create_task(finish(e, request(LONG, background=True, max_tokens=16)))
        await asyncio.sleep(0)  # the summary is submitted first
        question = request("Hello, where is my parcel?", background=False, max_tokens=8)
        customer = await finish(e, question)
        done = await summary
        assert customer.timings.first_token is not None
        assert done.timings.first_token is not None
        assert customer.timings.first_token < done.timings.first_token
        assert done.usage.completion_tokens > 0  # it still ran, once nobody waited
    finally:
        await e.close()


async def test_background_work_gives_its_only_slot_to_a_customer() -> None:
    e = LlamaCppEngine(slots=1, threads=2, warmup=False)
    await e.start()
    try:
        events = e.generate(request(LONG, background=True, max_tokens=200))
        started = await anext(events)  # the summary holds the one slot and decodes
        assert isinstance(started, TokenDelta)
        customer = await finish(e, request("Hi", background=False, max_tokens=4))
        assert customer.usage.completion_tokens > 0
        with pytest.raises(EngineError, match="gave its slot"):
            async for _ in events:
                pass
    finally:
        await e.close()


async def test_a_prompt_not_to_keep_leaves_no_prefix_behind() -> None:
    e = LlamaCppEngine(slots=2, threads=2, warmup=False)
    await e.start()
    try:
        kept = request("Where is my parcel?", background=False, max_tokens=2)
        await finish(e, kept)
        assert e.stats().prefix_cache_entries == 1
        summary = replace(request(LONG, background=True, max_tokens=2), keep_prefix=False)
        await finish(e, summary)
        stats = e.stats()
        assert stats.prefix_cache_entries == 1  # the customer's prefix, not the summary's
        assert stats.prefix_cache_tokens < len(LONG) // 4
    finally:
        await e.close()


async def test_the_next_prompt_is_prefilled_while_customers_decode_and_a_summary_is_not() -> None:
    """A kept background prompt (the next turn's new start) is read in slices alongside a
    decoding customer; a summary's prompt waits for a step with no customer."""
    e = LlamaCppEngine(slots=3, threads=2, warmup=False)
    await e.start()
    try:
        # Counting keeps it decoding to max_tokens: the prefill below needs several steps.
        question = request("Count from 1 to 100: 1, 2, 3,", background=False, max_tokens=40)
        events = e.generate(question)
        assert isinstance(await anext(events), TokenDelta)  # the customer decodes
        customer = asyncio.create_task(rest(events))
        warm = asyncio.create_task(finish(e, request(LONG, background=True, max_tokens=1)))
        summary = asyncio.create_task(
            finish(e, request("Briefly. " + LONG, background=True, max_tokens=1, keep_prefix=False))
        )
        served = await customer
        assert served.timings.last_token is not None
        prefilled = await warm
        assert prefilled.timings.first_token is not None
        assert prefilled.timings.first_token < served.timings.last_token
        summarised = await summary
        assert summarised.timings.prefill_started is not None
        assert summarised.timings.prefill_started >= served.timings.last_token
    finally:
        await e.close()


async def test_a_prefill_that_gives_its_slot_up_keeps_what_it_read() -> None:
    e = LlamaCppEngine(slots=1, threads=2, warmup=False)
    await e.start()
    try:
        text = " ".join([LONG] * 6)  # many background slices
        warm = asyncio.create_task(finish(e, request(text, background=True, max_tokens=1)))
        for _ in range(10_000):  # until it has read a slice
            if e.stats().kv_used_cells:
                break
            await asyncio.sleep(0.001)
        await finish(e, request("Hi", background=False, max_tokens=2))
        with pytest.raises(EngineError, match="gave its slot"):
            await warm
        again = await finish(e, request(text, background=False, max_tokens=1))
        assert again.usage.cached_prompt_tokens > 8  # what it read before it gave way
        assert again.usage.cached_prompt_tokens < again.usage.prompt_tokens - 1
    finally:
        await e.close()
