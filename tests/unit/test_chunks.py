"""Reading a remote engine's chunks (engine/chunks.py), joining them into a whole reply
(api/openai/assemble.py), and passing each on as it comes (RemoteEngine)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kefu.api.openai.assemble import Assembled
from kefu.engine.base import ChatMessage, Finished, GenerationRequest, TokenDelta
from kefu.engine.chunks import ChunkReader
from tests.http.scripted_upstream import ScriptedUpstream, chunk, text_chunks


def call(index: int, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, **fields}]}}]}


def test_a_plain_text_chunk_carries_no_fields() -> None:
    read = ChunkReader().read(chunk({"content": "hi"}, logprobs=None))
    assert (read.text, read.fields, read.finish_reason) == ("hi", None, None)


def test_unknown_finish_reasons_are_stops_and_known_ones_pass() -> None:
    reader = ChunkReader()
    assert reader.read(chunk(finish="eos")).finish_reason == "stop"
    assert reader.read(chunk(finish="tool_calls")).finish_reason == "tool_calls"
    assert reader.read(chunk(finish=["odd"])).finish_reason == "stop"


def test_malformed_choices_are_skipped_not_fatal() -> None:
    reader = ChunkReader()
    assert reader.read({"choices": "x"}).text == ""
    assert reader.read({"choices": [5, {"delta": "x"}, {"delta": {"content": 3}}]}).text == ""


def test_repeated_ids_and_names_are_dropped_and_changes_pass() -> None:
    reader = ChunkReader()
    first = reader.read(call(0, id="c1", type="function", function={"name": "f", "arguments": ""}))
    again = reader.read(call(0, id="c1", type="function", function={"name": "f", "arguments": "{"}))
    other = reader.read(call(1, id="c2", type="function", function={"name": "g", "arguments": ""}))
    renamed = reader.read(call(1, function={"name": "h", "arguments": "}"}))
    assert first.fields is not None
    assert again.fields is not None
    assert first.fields.delta["tool_calls"][0]["function"]["name"] == "f"
    assert again.fields.delta["tool_calls"] == [{"index": 0, "function": {"arguments": "{"}}]
    assert other.fields is not None
    assert other.fields.delta["tool_calls"][0]["id"] == "c2"
    assert renamed.fields is not None
    assert renamed.fields.delta["tool_calls"][0]["function"]["name"] == "h"


def test_a_role_chunks_fields_go_out_with_the_next_delta() -> None:
    reader = ChunkReader()
    assert reader.read(chunk({"role": "assistant"}, system_fingerprint="fp")).fields is None
    read = reader.read(chunk({"content": "a"}))
    assert read.fields is not None
    assert read.fields.chunk == {"system_fingerprint": "fp"}
    assert reader.read(chunk({"content": "b"})).fields is None


def test_a_whole_reply_joins_the_fragments() -> None:
    reader, reply = ChunkReader(), Assembled()
    for data in (
        call(0, id="c1", type="function", function={"name": "f", "arguments": '{"a":'}),
        call(1, id="c2", type="function", function={"name": "g", "arguments": "{}"}),
        call(0, function={"arguments": " 1}"}),
        chunk({"refusal": "no"}, choice={"logprobs": {"content": [1]}, "stop_reason": 7}),
        chunk({"refusal": "pe"}, choice={"logprobs": {"content": [2]}, "stop_reason": 8}),
    ):
        read = reader.read(data)
        reply.add(read.text, read.fields)
    assert reply.content is None
    assert reply.message_fields() == {
        "refusal": "nope",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }
    assert reply.choice == {"logprobs": {"content": [1, 2]}, "stop_reason": 8}


def test_text_alone_is_content_even_when_empty() -> None:
    reply = Assembled()
    assert reply.content == ""
    reply.add("hi", None)
    assert (reply.content, reply.message_fields()) == ("hi", {})


@pytest.mark.anyio
async def test_the_engine_passes_each_fragment_on_before_the_next_arrives() -> None:
    upstream = ScriptedUpstream(
        [
            *text_chunks(),
            call(0, id="c", function={"name": "f", "arguments": "{"}) | {"id": "x"},
            call(0, function={"arguments": "}"}),
            chunk(finish="tool_calls"),
        ]
    )
    upstream.gate, upstream.hold_after = asyncio.Event(), 2
    engine = upstream.engine()
    events = engine.generate(GenerationRequest([ChatMessage("user", "hi")]))
    first = await anext(events)
    assert isinstance(first, TokenDelta)
    assert first.text == ""
    assert first.fields is not None
    assert first.fields.delta["tool_calls"][0]["id"] == "c"
    assert upstream.sent == 2  # the role chunk and this fragment: nothing was waited for
    upstream.gate.set()
    rest = [event async for event in events]
    assert isinstance(rest[-1], Finished)
    assert rest[-1].finish_reason == "tool_calls"
    await engine.close()
