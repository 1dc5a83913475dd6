"""FakeEngine: deterministic replies, length and stop endings, cancellation, readiness."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kefu.engine.base import (
    ChatMessage,
    Engine,
    Finished,
    GenerationEvent,
    GenerationRequest,
    SamplingParams,
    TokenDelta,
)
from kefu.engine.fake import FakeEngine
from kefu.errors import ContextLengthExceeded, EngineNotReady

pytestmark = pytest.mark.anyio


def request(
    message: str = "hello world",
    *,
    max_tokens: int = 256,
    stop: Sequence[str] = (),
    system: str = "be nice",
) -> GenerationRequest:
    return GenerationRequest(
        messages=[ChatMessage("system", system), ChatMessage("user", message)],
        sampling=SamplingParams(max_tokens=max_tokens, stop=tuple(stop)),
        request_id="r1",
    )


async def started(*, context_window: int = 2048, reply_words: int | None = None) -> FakeEngine:
    engine = FakeEngine(context_window=context_window, reply_words=reply_words)
    await engine.start()
    return engine


async def collect(engine: FakeEngine, req: GenerationRequest) -> tuple[list[str], Finished]:
    events: list[GenerationEvent] = [event async for event in engine.generate(req)]
    *deltas, last = events
    assert isinstance(last, Finished), "the stream must end with exactly one Finished"
    assert all(isinstance(d, TokenDelta) for d in deltas)
    return [d.text for d in deltas if isinstance(d, TokenDelta)], last


async def test_satisfies_the_engine_protocol() -> None:
    engine: Engine = await started()
    assert engine.model_id == "fake-engine"
    assert engine.context_window == 2048


async def test_deterministic_reply() -> None:
    engine = await started()
    first, finished = await collect(engine, request("hello world"))
    second, _ = await collect(engine, request("hello world"))
    assert first == second == ["fake", " reply", " to:", " hello", " world"]
    assert "".join(first) == "fake reply to: hello world"
    assert finished.finish_reason == "stop"
    assert finished.usage.prompt_tokens == engine.count_chat_tokens(request().messages)
    assert finished.usage.completion_tokens == 5
    assert finished.usage.total_tokens == finished.usage.prompt_tokens + 5
    timings = finished.timings
    assert timings.first_token is not None
    assert timings.last_token is not None
    assert timings.queued <= timings.first_token <= timings.last_token
    assert engine.cancelled == 0
    assert len(engine.requests) == 2


async def test_reply_uses_the_last_user_message() -> None:
    engine = await started()
    req = GenerationRequest(
        messages=[
            ChatMessage("user", "first"),
            ChatMessage("assistant", "fake reply to: first"),
            ChatMessage("user", "second"),
        ]
    )
    text, _ = await collect(engine, req)
    assert "".join(text) == "fake reply to: second"


async def test_count_chat_tokens() -> None:
    engine = FakeEngine()
    messages = [ChatMessage("system", "a b c"), ChatMessage("user", "d")]
    assert engine.count_chat_tokens(messages) == (3 + 3) + (1 + 3)
    assert engine.count_chat_tokens([]) == 0


async def test_max_tokens_gives_length() -> None:
    engine = await started()
    text, finished = await collect(engine, request(max_tokens=2))
    assert text == ["fake", " reply"]
    assert finished.finish_reason == "length"
    assert finished.usage.completion_tokens == 2


async def test_context_window_limits_the_reply() -> None:
    req = request("hello world")
    prompt = FakeEngine().count_chat_tokens(req.messages)
    engine = await started(context_window=prompt + 3)
    text, finished = await collect(engine, req)
    assert len(text) == 3
    assert finished.finish_reason == "length"


async def test_reply_words() -> None:
    engine = await started(reply_words=4)
    text, finished = await collect(engine, request())
    assert "".join(text) == "w0 w1 w2 w3"
    assert finished.finish_reason == "stop"


async def test_stop_string_cuts_the_reply() -> None:
    engine = await started()
    text, finished = await collect(engine, request("hello world", stop=["to:"]))
    assert "".join(text) == "fake reply "
    assert "to:" not in "".join(text)
    assert finished.finish_reason == "stop"


async def test_stop_string_beats_max_tokens_finish_reason() -> None:
    engine = await started()
    text, finished = await collect(engine, request("a b c d", max_tokens=4, stop=["reply"]))
    assert "".join(text) == "fake "
    assert finished.finish_reason == "stop"


async def test_stop_string_not_in_reply_is_harmless() -> None:
    engine = await started()
    text, finished = await collect(engine, request("hi", stop=["", "zzz"]))
    assert "".join(text) == "fake reply to: hi"
    assert finished.finish_reason == "stop"


async def test_stop_string_spanning_words_is_not_sent() -> None:
    engine = await started()
    text, finished = await collect(engine, request("hello", stop=["reply to"]))
    assert "".join(text) == "fake "
    assert finished.finish_reason == "stop"


async def test_consumer_closing_early_counts_as_cancelled() -> None:
    engine = await started()
    agen = engine.generate(request("one two three"))
    first = await agen.__anext__()
    assert first == TokenDelta("fake")
    assert engine.stats().running == 1
    await agen.aclose()
    assert engine.cancelled == 1
    assert engine.stats().running == 0
    # A fully consumed stream is not a cancellation.
    await collect(engine, request())
    assert engine.cancelled == 1


async def test_close_before_first_event_is_not_counted() -> None:
    engine = await started()
    agen = engine.generate(request())
    await agen.aclose()  # never started: nothing ran, nothing to cancel
    assert engine.cancelled == 0
    assert engine.requests == []


async def test_prompt_too_long() -> None:
    engine = await started(context_window=10)
    agen = engine.generate(request("many words " * 10))
    with pytest.raises(ContextLengthExceeded, match="context window is 10"):
        await agen.__anext__()
    assert engine.requests == []
    assert engine.cancelled == 0
    assert engine.stats().running == 0


async def test_prompt_exactly_at_window_is_too_long() -> None:
    req = request("x")
    engine = await started(context_window=FakeEngine().count_chat_tokens(req.messages))
    with pytest.raises(ContextLengthExceeded):
        await collect(engine, req)


async def test_not_ready_before_start_and_after_close() -> None:
    engine = FakeEngine()
    with pytest.raises(EngineNotReady) as info:
        await engine.generate(request()).__anext__()
    assert info.value.code == "engine_not_ready"
    assert info.value.retry_after > 0
    await engine.start()
    text, _ = await collect(engine, request("hi"))
    assert text
    await engine.close()
    with pytest.raises(EngineNotReady):
        await collect(engine, request())
    assert engine.cancelled == 0


async def test_background_work_is_counted_apart_while_it_runs() -> None:
    engine = await started(reply_words=4)
    background = GenerationRequest(
        messages=[ChatMessage("user", "read ahead")],
        sampling=SamplingParams(max_tokens=1),
        request_id="read-ahead",
        background=True,
    )
    events = engine.generate(background)
    assert isinstance(await anext(events), TokenDelta)
    stats = engine.stats()
    assert (stats.running, stats.background) == (1, 1)
    await events.aclose()
    stats = engine.stats()
    assert (stats.running, stats.background) == (0, 0)
