"""SSE parsing, and what the events of each API mean: kefu's /chat and OpenAI's chunks.

The frames are made with kefu's own encoder and wire models, so a change there that the
bench could not read shows up here.
"""

from __future__ import annotations

import json

import pytest

from kefu.api.openai.protocol import (
    ChatCompletionChunk,
    ChunkChoice,
    Delta,
    PromptTokensDetails,
    UsageInfo,
)
from kefu.api.sse import sse_event
from kefu.bench.sse import (
    ChatStream,
    OpenAIStream,
    SseEvent,
    SseParser,
    StreamError,
    error_message,
    parse_events,
)


def test_parser_fields_comments_and_multiline_data() -> None:
    text = (
        ": keep-alive\n"
        "event: token\n"
        "data: one\n"
        "data: two\n"
        "\n"
        "id: 7\n"
        "retry: 100\n"
        "data:no-space\n"
        "\n"
        "\n"  # an extra blank line is no event
        "event: done\n"
        "data: {}\n"  # the body ends without a blank line: still an event
    )
    assert parse_events(text) == [
        SseEvent("token", "one\ntwo"),
        SseEvent("message", "no-space"),
        SseEvent("done", "{}"),
    ]


def test_parser_is_incremental_and_handles_crlf() -> None:
    parser = SseParser()
    assert parser.feed("event: meta") is None
    assert parser.feed('data: {"session_id": "s1"}') is None
    assert parser.feed("") == SseEvent("meta", '{"session_id": "s1"}')
    assert parse_events("data: a\r\n\r\ndata: b\r\n\r\n") == [
        SseEvent("message", "a"),
        SseEvent("message", "b"),
    ]
    assert parser.feed("event: lonely") is None
    assert parser.feed("") is None  # an event name without data dispatches nothing
    assert parser.feed("data: x") is None
    assert parser.feed("") == SseEvent("message", "x")


def chat_body(*frames: bytes) -> list[SseEvent]:
    return parse_events(b"".join(frames).decode())


def test_chat_stream() -> None:
    events = chat_body(
        sse_event({"session_id": "abc"}, event="meta"),
        sse_event({"text": "你好"}, event="token"),
        sse_event({"text": ""}, event="token"),
        sse_event({"text": "!"}, event="token"),
        sse_event(
            {
                "session_id": "abc",
                "reply": "你好!",
                "tier": "llm",
                "usage": {
                    "prompt_tokens": 60,
                    "completion_tokens": 3,
                    "cached_prompt_tokens": 50,
                    "total_tokens": 63,
                },
                "timings": {"ttft_ms": 12.5, "e2e_ms": 40, "note": "x"},
            },
            event="done",
        ),
    )
    stream = ChatStream()
    assert [stream.handle(e) for e in events] == ["", "你好", "", "!", ""]
    assert stream.complete
    assert stream.session_id == "abc"
    assert stream.tier == "llm"
    assert (stream.prompt_tokens, stream.completion_tokens, stream.cached_prompt_tokens) == (
        60,
        3,
        50,
    )
    assert stream.server_timings == {"ttft_ms": 12.5, "e2e_ms": 40.0}
    assert "".join(stream.parts) == "你好!"


def test_chat_error_event() -> None:
    envelope = {"error": {"message": "engine failed", "type": "server_error", "code": None}}
    [meta, error] = chat_body(
        sse_event({"session_id": "abc"}, event="meta"), sse_event(envelope, event="error")
    )
    stream = ChatStream()
    stream.handle(meta)
    with pytest.raises(StreamError, match="server_error: engine failed"):
        stream.handle(error)
    assert not stream.complete
    assert stream.session_id == "abc"


def test_chat_malformed_data() -> None:
    with pytest.raises(StreamError, match="malformed event data"):
        ChatStream().handle(SseEvent("token", "{not json"))
    with pytest.raises(StreamError, match="expected a JSON object"):
        ChatStream().handle(SseEvent("token", "[1]"))


def chunk(delta: Delta, finish: str | None = None) -> bytes:
    model = ChatCompletionChunk(
        id="c1", created=1, model="m", choices=[ChunkChoice(delta=delta, finish_reason=finish)]
    )
    return sse_event(model.model_dump_json(exclude_none=True))


def test_openai_stream_skips_the_empty_role_chunk() -> None:
    usage = ChatCompletionChunk(
        id="c1",
        created=1,
        model="m",
        choices=[],
        usage=UsageInfo(
            prompt_tokens=70,
            completion_tokens=2,
            total_tokens=72,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=64),
        ),
    )
    events = chat_body(
        chunk(Delta(role="assistant", content="")),
        chunk(Delta(content="Hi")),
        chunk(Delta(content=" there")),
        chunk(Delta(), "stop"),
        sse_event(usage.model_dump_json(exclude_none=True)),
        b"data: [DONE]\n\n",
    )
    stream = OpenAIStream()
    assert [stream.handle(e) for e in events] == ["", "Hi", " there", "", "", ""]
    assert stream.complete
    assert stream.tier is None
    assert (stream.prompt_tokens, stream.completion_tokens, stream.cached_prompt_tokens) == (
        70,
        2,
        64,
    )


def test_openai_finish_reason_completes_without_done() -> None:
    stream = OpenAIStream()
    stream.handle(parse_events(chunk(Delta(content="x")).decode())[0])
    assert not stream.complete
    stream.handle(parse_events(chunk(Delta(), "length").decode())[0])
    assert stream.complete


def test_openai_error_chunk() -> None:
    body = {"error": {"message": "queue is full", "type": "x", "code": "queue_full"}}
    with pytest.raises(StreamError, match="queue_full: queue is full"):
        OpenAIStream().handle(SseEvent("message", json.dumps(body)))
    with pytest.raises(StreamError, match="malformed"):
        OpenAIStream().handle(SseEvent("message", "{oops"))


def test_error_message_shapes() -> None:
    assert error_message({"error": {"message": "m", "code": "c"}}) == "c: m"
    assert error_message({"error": {"message": "m", "type": "t"}}) == "t: m"
    assert error_message({"error": "plain"}) == "plain"
    assert error_message(["x"]) == "['x']"
