"""POST /v1/chat/completions and GET /v1/models over HTTP, on the FakeEngine."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from kefu.engine.fake import FakeEngine
from tests.conftest import ClientFactory
from tests.http.helpers import counted_on_the_loop, parse_sse

URL = "/v1/chat/completions"


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def complete(client: TestClient, **body: Any) -> dict[str, Any]:
    body.setdefault("messages", [user("hello there")])
    response = client.post(URL, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def stream_events(client: TestClient, **body: Any) -> tuple[str, list[dict[str, Any]]]:
    """The raw SSE body and the decoded chunks (without the final [DONE])."""
    body.setdefault("messages", [user("hello there")])
    response = client.post(URL, json={**body, "stream": True})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    events = parse_sse(response.text)
    assert all(e.event is None for e in events), "OpenAI streams use unnamed events"
    assert events[-1].data == "[DONE]"
    assert all(e.data != "[DONE]" for e in events[:-1])
    return response.text, [e.json() for e in events[:-1]]


# --- non-streaming ---------------------------------------------------------------------------


def test_completion_shape(client: TestClient, fake_engine: FakeEngine) -> None:
    response = client.post(URL, json={"model": "m", "messages": [user("hello there")]})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"id", "object", "created", "model", "choices", "usage"}
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{32}", body["id"])
    assert body["object"] == "chat.completion"
    assert isinstance(body["created"], int)
    assert body["created"] > 1_600_000_000
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "fake reply to: hello there"},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    # The fake engine counts words, plus 3 template tokens per message.
    assert body["usage"] == {
        "prompt_tokens": 2 + 3,
        "completion_tokens": 5,
        "total_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert len(fake_engine.requests) == 1


def test_completion_ids_are_unique(client: TestClient) -> None:
    ids = {complete(client)["id"] for _ in range(3)}
    assert len(ids) == 3


def test_server_timing_header(client: TestClient) -> None:
    response = client.post(URL, json={"messages": [user("hi")]})
    assert response.status_code == 200
    entries = [e.strip() for e in response.headers["server-timing"].split(",")]
    parsed = {}
    for entry in entries:
        match = re.fullmatch(r"([a-z0-9_]+);dur=(\d+(?:\.\d+)?)", entry)
        assert match, f"not a Server-Timing entry: {entry!r}"
        parsed[match[1]] = float(match[2])
    assert {"ttft", "e2e"} <= set(parsed)
    assert parsed["ttft"] <= parsed["e2e"]


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"max_tokens": 2}, "fake reply"),
        ({"max_completion_tokens": 3}, "fake reply to:"),
        # max_completion_tokens (the newer name) wins over max_tokens.
        ({"max_tokens": 4, "max_completion_tokens": 1}, "fake"),
    ],
)
def test_token_limit_finishes_with_length(
    client: TestClient, fake_engine: FakeEngine, limits: dict[str, int], expected: str
) -> None:
    body = complete(client, **limits)
    choice = body["choices"][0]
    assert choice["message"]["content"] == expected
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == len(expected.split())
    assert fake_engine.requests[-1].sampling.max_tokens == len(expected.split())


def test_token_limit_not_reached_is_stop(client: TestClient) -> None:
    body = complete(client, max_tokens=50)
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"]["content"] == "fake reply to: hello there"


@pytest.mark.parametrize("stop", ["to:", ["nothing", "to:"]])
def test_stop_strings(client: TestClient, fake_engine: FakeEngine, stop: str | list[str]) -> None:
    body = complete(client, stop=stop)
    choice = body["choices"][0]
    assert choice["message"]["content"].rstrip() == "fake reply"
    assert "to:" not in choice["message"]["content"]
    assert choice["finish_reason"] == "stop"
    assert "to:" in fake_engine.requests[-1].sampling.stop


def test_sampling_parameters_reach_the_engine(client: TestClient, fake_engine: FakeEngine) -> None:
    complete(client, temperature=0, top_p=0.5, seed=7, max_tokens=9)
    sampling = fake_engine.requests[-1].sampling
    assert sampling.temperature == 0
    assert sampling.top_p == 0.5
    assert sampling.seed == 7
    assert sampling.max_tokens == 9


def test_unknown_fields_are_ignored(client: TestClient) -> None:
    body = complete(
        client,
        messages=[{"role": "user", "content": "hello there", "name": "ann", "extra": [1]}],
        frequency_penalty=0.5,
        logit_bias={"42": 1},
        tools=[],
        tool_choice="none",
        logprobs=False,
        response_format={"type": "text"},
        something_new={"nested": True},
        stream_options=None,
        n=1,
        user="customer-1",
    )
    assert body["choices"][0]["message"]["content"] == "fake reply to: hello there"


@pytest.mark.parametrize("model", ["gpt-4o", "any/thing:v1", "模型", "x" * 300])
def test_any_model_name_is_accepted_and_echoed(client: TestClient, model: str) -> None:
    assert complete(client, model=model)["model"] == model


@pytest.mark.parametrize("body", [{}, {"model": ""}])
def test_no_model_name_answers_with_the_engine_model(
    client: TestClient, body: dict[str, Any]
) -> None:
    assert complete(client, **body)["model"] == "fake-engine"


def test_roles_reach_the_engine(client: TestClient, fake_engine: FakeEngine) -> None:
    messages = [
        {"role": "developer", "content": "be brief"},
        {"role": "system", "content": "you sell shoes"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye now"},
    ]
    body = complete(client, messages=messages)
    assert body["choices"][0]["message"]["content"] == "fake reply to: bye now"
    sent = [(m.role, m.content) for m in fake_engine.requests[-1].messages]
    assert sent == [
        ("system", "be brief"),  # "developer" is the new name of "system"
        ("system", "you sell shoes"),
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "bye now"),
    ]


def test_content_as_text_parts(client: TestClient, fake_engine: FakeEngine) -> None:
    parts = [{"type": "text", "text": "hello "}, {"type": "text", "text": "world"}]
    body = complete(client, messages=[user(parts)])
    assert body["choices"][0]["message"]["content"] == "fake reply to: hello world"
    assert fake_engine.requests[-1].messages[-1].content == "hello world"


def test_null_assistant_content_is_empty_text(client: TestClient, fake_engine: FakeEngine) -> None:
    messages = [user("a"), {"role": "assistant", "content": None}, user("b")]
    complete(client, messages=messages)
    assert fake_engine.requests[-1].messages[1].content == ""


def test_reply_is_capped_by_the_context_window(client_factory: ClientFactory) -> None:
    engine = FakeEngine(context_window=20, reply_words=100)
    with client_factory(engine=engine) as client:
        body = complete(client, messages=[user("one two three four five")])  # 8 prompt tokens
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 20 - 8
    assert engine.requests[-1].sampling.max_tokens == 12


def test_default_max_tokens_comes_from_settings(client_factory: ClientFactory) -> None:
    engine = FakeEngine(reply_words=100)
    with client_factory(engine=engine, max_tokens=7) as client:
        body = complete(client)
    assert body["usage"]["completion_tokens"] == 7
    assert body["choices"][0]["finish_reason"] == "length"


# --- streaming -------------------------------------------------------------------------------


def test_stream_framing(client: TestClient) -> None:
    text, chunks = stream_events(client)
    # Exact framing: one "data: <json>" line per event, blank line between, [DONE] last.
    frames = text.split("\n\n")
    assert frames[-1] == ""
    assert frames[-2] == "data: [DONE]"
    for frame in frames[:-1]:
        assert frame.startswith("data: ")
        assert "\n" not in frame
    assert len(frames) - 2 == len(chunks)

    first, *content, last = chunks
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{32}", ids.pop())
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"fake-engine"}
    assert len({c["created"] for c in chunks}) == 1

    assert first["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""}}]
    assert content, "no content chunks"
    for chunk in content:
        (choice,) = chunk["choices"]
        assert set(choice["delta"]) == {"content"}
        assert choice.get("finish_reason") is None
    assert "".join(c["choices"][0]["delta"]["content"] for c in content) == (
        "fake reply to: hello there"
    )
    assert last["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert all("usage" not in c for c in chunks), "usage only when include_usage is true"


def test_stream_matches_non_stream(client: TestClient) -> None:
    body = {"messages": [user("where is my parcel")], "max_tokens": 4}
    full = complete(client, **body)
    _, chunks = stream_events(client, **body)
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert streamed == full["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("options", [None, {}, {"include_usage": False}])
def test_stream_without_usage(client: TestClient, options: dict[str, Any] | None) -> None:
    _, chunks = stream_events(client, stream_options=options)
    assert all(c["choices"] for c in chunks)
    assert all("usage" not in c for c in chunks)


def test_stream_with_usage(client: TestClient) -> None:
    _, chunks = stream_events(client, stream_options={"include_usage": True})
    *rest, finish, usage = chunks
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert usage["choices"] == []
    assert usage["id"] == finish["id"]
    assert usage["object"] == "chat.completion.chunk"
    assert usage["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 5,
        "total_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert all("usage" not in c for c in [*rest, finish])


def test_stream_echoes_model_and_honours_stop(client: TestClient) -> None:
    _, chunks = stream_events(client, model="my-model", stop=["to:"])
    assert {c["model"] for c in chunks} == {"my-model"}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text.rstrip() == "fake reply"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_stream_unicode_is_sent_as_utf8(client: TestClient) -> None:
    _, chunks = stream_events(client, messages=[user("你好 世界")])
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "fake reply to: 你好 世界"


# --- models ----------------------------------------------------------------------------------


def test_models_list(client: TestClient) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    (card,) = body["data"]
    assert card["id"] == "fake-engine"
    assert card["object"] == "model"
    assert card["owned_by"] == "kefu"
    assert isinstance(card["created"], int)
    assert card["meta"] == {"context_window": 2048, "group": "default"}


@pytest.mark.parametrize("words", [20, 600])
def test_the_prompt_is_counted_off_the_event_loop(
    client: TestClient, fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch, words: int
) -> None:
    loops = counted_on_the_loop(fake_engine, monkeypatch)
    complete(client, messages=[user("word " * words)])
    assert loops[0] is False  # checking the request (the fake engine counts again)
    first_of_the_stream = len(loops)
    _, chunks = stream_events(client, messages=[user("word " * words)])
    assert chunks
    assert loops[first_of_the_stream] is False
