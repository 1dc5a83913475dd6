"""/v1/chat/completions passes the chat API through to a remote engine (a scripted upstream
here; tests/e2e/test_tool_calls.py runs a real one): the request's fields and messages as
they came, the reply's tool calls, logprobs and unknown fields back. The embedded engine
refuses what it cannot honour, naming the field."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from kefu.app import create_app
from kefu.settings import Settings
from tests.conftest import wait_ready
from tests.http.helpers import assert_envelope, parse_sse
from tests.http.scripted_upstream import MODEL, ScriptedUpstream, chunk, text_chunks

URL = "/v1/chat/completions"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "Look up an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
CALL_ID = "call_abc"
# A tool call streamed the way llama-cpp-python's server streams it: id, type and name
# repeated in every fragment.
TOOL_CALL_CHUNKS = [
    chunk({"role": "assistant", "content": None, "tool_calls": None}),
    *(
        chunk(
            {
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": CALL_ID,
                        "type": "function",
                        "function": {"name": "order_status", "arguments": piece},
                    }
                ],
            }
        )
        for piece in ('{"order_id": ', '"LH-10023"', "}")
    ),
    chunk(finish="tool_calls"),
]
TOOL_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is LH-10023?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": CALL_ID,
                "type": "function",
                "function": {"name": "order_status", "arguments": '{"order_id": "LH-10023"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": CALL_ID, "content": "shipped Monday"},
]


@pytest.fixture
def upstream() -> ScriptedUpstream:
    return ScriptedUpstream()


@pytest.fixture
def client(
    upstream: ScriptedUpstream, settings_factory: Callable[..., Settings]
) -> Iterator[TestClient]:
    app = create_app(settings_factory(), engine_factory=lambda _: upstream.pool())
    with TestClient(app) as test_client:
        wait_ready(test_client)
        yield test_client


def chunks_of(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1].data == "[DONE]"
    return [e.json() for e in events[:-1]]


def test_the_request_reaches_the_engine_as_it_came(
    client: TestClient, upstream: ScriptedUpstream
) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages: list[dict[str, Any]] = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]},
        *TOOL_TURN,
    ]
    passed = {
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "order_status"}},
        "parallel_tool_calls": False,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
        "logprobs": True,
        "top_logprobs": 2,
        "something_new": {"nested": [1, None]},
        "user": "customer-7",
    }
    body = {"model": "m", "messages": messages, "seed": 11, "max_tokens": 20, **passed}
    assert client.post(URL, json=body).status_code == 200
    sent = upstream.bodies[-1]
    assert {key: sent[key] for key in passed} == passed
    assert sent["seed"] == 11
    assert sent["max_tokens"] == 20
    assert sent["model"] == MODEL
    assert sent["stream"] is True
    expected = [dict(m) for m in messages]
    expected[0]["role"] = "system"  # kefu's one rename: few templates know "developer"
    expected[3]["content"] = ""  # llama-cpp-python's server answers null with a 500
    assert sent["messages"] == expected


def test_a_tool_call_comes_back_whole(client: TestClient, upstream: ScriptedUpstream) -> None:
    upstream.chunks = [
        *TOOL_CALL_CHUNKS[:-1],
        chunk(finish="tool_calls", choice={"logprobs": None}),
    ]
    response = client.post(URL, json={"messages": TOOL_TURN[:1], "tools": TOOLS})
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == TOOL_TURN[1]  # the assistant's tool call, as a client keeps it


def test_a_streamed_tool_call_comes_in_fragments_named_once(
    client: TestClient, upstream: ScriptedUpstream
) -> None:
    upstream.chunks = list(TOOL_CALL_CHUNKS)
    body = {"messages": TOOL_TURN[:1], "tools": TOOLS, "stream": True}
    chunks = chunks_of(client.post(URL, json=body))
    calls = [
        c["choices"][0]["delta"]["tool_calls"]
        for c in chunks
        if "tool_calls" in c["choices"][0]["delta"]
    ]
    # One chunk per fragment, as the engine sent them; the first names the call.
    named = {"name": "order_status", "arguments": '{"order_id": '}
    assert calls == [
        [{"index": 0, "id": CALL_ID, "type": "function", "function": named}],
        [{"index": 0, "function": {"arguments": '"LH-10023"'}}],
        [{"index": 0, "function": {"arguments": "}"}}],
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all("content" not in c["choices"][0]["delta"] for c in chunks[1:])


def test_logprobs_and_unknown_fields_come_back(
    client: TestClient, upstream: ScriptedUpstream
) -> None:
    def logprob(token: str) -> dict[str, Any]:
        return {"content": [{"token": token, "logprob": -0.5, "bytes": None, "top_logprobs": []}]}

    def text(piece: str, thought: str) -> dict[str, Any]:
        delta = {"content": piece, "reasoning_content": thought}
        return chunk(delta, choice={"logprobs": logprob(piece)}, system_fingerprint="fp_1")

    upstream.chunks = [
        chunk({"role": "assistant", "content": ""}, system_fingerprint="fp_1"),
        text("Hel", "think"),
        text("lo", "ing"),
        chunk(finish="stop", system_fingerprint="fp_1"),
    ]
    body = {"messages": TOOL_TURN[:1], "logprobs": True}
    whole = client.post(URL, json=body).json()
    assert whole["system_fingerprint"] == "fp_1"
    choice = whole["choices"][0]
    assert choice["message"]["content"] == "Hello"
    assert choice["message"]["reasoning_content"] == "thinking"
    assert [t["token"] for t in choice["logprobs"]["content"]] == ["Hel", "lo"]
    assert choice["logprobs"]["content"][0]["bytes"] is None  # nulls inside are kept
    streamed = chunks_of(client.post(URL, json={**body, "stream": True}))
    texts = [c for c in streamed if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert [c["choices"][0]["logprobs"]["content"][0]["token"] for c in texts] == ["Hel", "lo"]
    assert all(c["system_fingerprint"] == "fp_1" for c in texts)
    assert [c["choices"][0]["delta"]["reasoning_content"] for c in texts] == ["think", "ing"]


def test_plain_text_streams_as_before(client: TestClient, upstream: ScriptedUpstream) -> None:
    upstream.chunks = [*text_chunks("Hel", "lo"), chunk(finish="length")]
    chunks = chunks_of(client.post(URL, json={"messages": TOOL_TURN[:1], "stream": True}))
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
        {"content": "lo"},
        {},
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert set(chunks[1]) == {"id", "object", "created", "model", "choices"}


def test_an_empty_stream_is_the_engine_declining_not_failing(
    client: TestClient, upstream: ScriptedUpstream
) -> None:
    """llama-cpp-python's server answers a streamed tool_choice "auto" with a 200 and an
    empty stream; counted as a failure, a few such requests opened every breaker."""
    upstream.chunks = []
    for _ in range(4):  # over --breaker-failures
        response = client.post(URL, json={"messages": TOOL_TURN[:1], "tools": TOOLS})
        error = assert_envelope(response, 400, "invalid_request")
        assert "empty stream" in error["message"]
    row = client.get("/ready").json()["engine"]["engines"][0]
    assert (row["breaker"], row["failures"]) == ("closed", 0)


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "function", "content": "x"}, "messages.0.role"),
        ({"role": "tool", "content": 5}, "messages.0.content"),
        ({"role": "user", "content": [{"type": "text"}]}, "messages.0.content.0"),
        ({"role": "user", "content": [{"text": "no type"}]}, "messages.0.content.0.type"),
    ],
)
def test_what_kefu_reads_stays_strict(
    client: TestClient, message: dict[str, Any], param: str
) -> None:
    response = client.post(URL, json={"messages": [message], "tools": TOOLS})
    assert_envelope(response, 400, "invalid_request")
    assert response.json()["error"]["param"] == param


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": TOOLS}, "tools"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"logprobs": True}, "logprobs"),
        ({"messages": TOOL_TURN}, "messages.1"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages.0.content",
        ),
    ],
)
def test_the_embedded_engine_refuses_what_it_cannot_honour(
    shared_client: TestClient, extra: dict[str, Any], param: str
) -> None:
    body = {"messages": TOOL_TURN[:1], **extra}
    for stream in (False, True):
        response = shared_client.post(URL, json={**body, "stream": stream})
        assert_envelope(response, 400, "invalid_request")
        error = response.json()["error"]
        assert error["param"] == param
        assert "--engine URL" in error["message"]
        if param == "tools":
            assert "vLLM" in error["message"]
            assert "chatml-function-calling" in error["message"]


def test_a_tool_choice_of_none_is_no_tool_call(shared_client: TestClient) -> None:
    body = {"messages": TOOL_TURN[:1], "tool_choice": "none", "tools": []}
    response = shared_client.post(URL, json=body)
    assert response.status_code == 200, response.text
    assert json.loads(response.text)["choices"][0]["finish_reason"] in ("stop", "length")
