"""Background work on the real scheduler: it never runs ahead of a waiting customer."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from kefu.engine.base import ChatMessage, Finished, GenerationRequest, SamplingParams, TokenDelta
from kefu.engine.llamacpp.engine import LlamaCppEngine
from kefu.errors import EngineError

pytestmark = [pytest.mark.model, pytest.mark.anyio]

COUNTING = "Count to two hundred: 1, 2, 3, 4, 5,"
LONG = "Summarise: " + " ".join(f"The customer asked about order LH-10{i:04d}." for i in range(12))


def request(text: str, *, background: bool, max_tokens: int) -> GenerationRequest:
    return GenerationRequest(
        messages=[ChatMessage("user", text)],
        sampling=SamplingParams(max_tokens=max_tokens, temperature=0),
        request_id="summary" if background else "customer",
        background=background,
    )


async def finish(e: LlamaCppEngine, r: GenerationRequest) -> Finished:
    async for event in e.generate(r):
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


async def test_background_work_pauses_while_a_customer_is_in_the_engine() -> None:
    e = LlamaCppEngine(slots=2, threads=2, warmup=False)
    await e.start()
    try:
        events = e.generate(request(COUNTING, background=True, max_tokens=40))
        assert isinstance(await anext(events), TokenDelta)  # the summary decodes, alone
        stats = e.stats()
        assert (stats.running, stats.background) == (1, 1)  # no customer's
        story = request(COUNTING, background=False, max_tokens=120)
        customer = await finish(e, story)
        summary: Finished | None = None
        async for event in events:
            if isinstance(event, Finished):
                summary = event
        assert summary is not None
        assert summary.timings.last_token is not None
        assert customer.timings.last_token is not None
        # A free slot, yet the summary's decode waited for the customer's to end: beside
        # it, every one of the customer's steps would have been wider.
        assert summary.timings.last_token > customer.timings.last_token
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
