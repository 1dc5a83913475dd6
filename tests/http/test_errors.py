"""Every error leaves as the OpenAI envelope, with the right status, and never as a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from kefu.engine.fake import FakeEngine
from tests.conftest import ClientFactory
from tests.http.helpers import (
    BrokenEngine,
    NeverReadyEngine,
    SettingsFactory,
    assert_envelope,
    make_app,
)

COMPLETIONS = "/v1/chat/completions"
HI = [{"role": "user", "content": "hi"}]
BOTH = pytest.mark.parametrize("path", [COMPLETIONS, "/chat"])


def invalid(response: Any, param: str | None = None) -> dict[str, Any]:
    error = assert_envelope(response, 400, "invalid_request", "invalid_request_error")
    if param is not None:
        assert error["param"] == param, error
    return error


# --- bodies that are not a request -----------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    "body",
    [b'{"messages": [', b"{message: 1}", b'{"message": "hi"} x', b"\xff\xfe", b"[" * 10_000],
)
def test_malformed_json(shared_client: TestClient, path: str, body: bytes) -> None:
    error = invalid(
        shared_client.post(path, content=body, headers={"content-type": "application/json"})
    )
    assert error["message"].startswith("the request body is not valid JSON")
    assert error["param"] is None


@BOTH
@pytest.mark.parametrize("body", [b"", b"   ", b"\n"])
def test_empty_body(shared_client: TestClient, path: str, body: bytes) -> None:
    error = invalid(shared_client.post(path, content=body))
    assert "empty" in error["message"]


@BOTH
@pytest.mark.parametrize("body", ["[]", '[{"message": "hi"}]', "null", '"hi"', "5", "true"])
def test_body_that_is_not_an_object(shared_client: TestClient, path: str, body: str) -> None:
    error = invalid(shared_client.post(path, content=body))
    assert error["message"] == "the request body must be a JSON object"


# --- /chat fields ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "message"),
        ({"session_id": "abc"}, "message"),
        ({"message": ""}, "message"),
        ({"message": "   \n\t"}, "message"),
        ({"message": 5}, "message"),
        ({"message": None}, "message"),
        ({"message": ["hi"]}, "message"),
        ({"message": "hi", "session_id": ""}, "session_id"),
        ({"message": "hi", "session_id": 5}, "session_id"),
        ({"message": "hi", "session_id": "s" * 129}, "session_id"),
        ({"message": "hi", "user_id": "u" * 257}, "user_id"),
    ],
)
def test_chat_field_errors(
    shared_client: TestClient, shared_engine: FakeEngine, body: dict[str, Any], param: str
) -> None:
    error = invalid(shared_client.post("/chat", json=body), param)
    assert f"'{param}'" in error["message"]
    assert shared_engine.requests == []


def test_chat_missing_message_says_required(shared_client: TestClient) -> None:
    error = invalid(shared_client.post("/chat", json={}), "message")
    assert error["message"] == "'message' is required"


# --- /v1/chat/completions fields -------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "messages"),
        ({"messages": "x"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": None}, "messages"),
        ({"messages": [5]}, "messages.0"),
        ({"messages": [{"content": "hi"}]}, "messages.0.role"),
        ({"messages": [{"role": "function", "content": "hi"}]}, "messages.0.role"),
        # Valid, but the embedded engine calls no tools (test_openai_passthrough.py).
        ({"messages": [{"role": "tool", "content": "hi"}]}, "messages.0"),
        ({"messages": HI, "temperature": "hot"}, "temperature"),
        ({"messages": HI, "temperature": 2.5}, "temperature"),
        ({"messages": HI, "temperature": -1}, "temperature"),
        ({"messages": HI, "n": 2}, "n"),
        ({"messages": HI, "n": 0}, "n"),
        ({"messages": HI, "top_p": 0}, "top_p"),
        ({"messages": HI, "top_p": 1.5}, "top_p"),
        ({"messages": HI, "max_tokens": 0}, "max_tokens"),
        ({"messages": HI, "max_tokens": "ten"}, "max_tokens"),
        ({"messages": HI, "max_completion_tokens": -5}, "max_completion_tokens"),
        ({"messages": HI, "seed": "x"}, "seed"),
        ({"messages": HI, "stream_options": "yes"}, "stream_options"),
        ({"messages": HI, "model": 5}, "model"),
    ],
)
def test_completion_field_errors(
    shared_client: TestClient, shared_engine: FakeEngine, body: dict[str, Any], param: str
) -> None:
    invalid(shared_client.post(COMPLETIONS, json=body), param)
    invalid(shared_client.post(COMPLETIONS, json={**body, "stream": True}), param)
    assert shared_engine.requests == []


@pytest.mark.parametrize(
    "body",
    [
        {"messages": HI, "stop": ["a", "b", "c", "d", "e"]},
        {"messages": HI, "stop": 5},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        {"messages": [{"role": "user", "content": 5}]},
    ],
)
def test_completion_union_field_errors(shared_client: TestClient, body: dict[str, Any]) -> None:
    invalid(shared_client.post(COMPLETIONS, json=body))


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": HI, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    ],
)
def test_union_field_errors_name_the_field(
    shared_client: TestClient, body: dict[str, Any], param: str
) -> None:
    invalid(shared_client.post(COMPLETIONS, json=body), param)


# --- size limits -----------------------------------------------------------------------------


@pytest.fixture
def small_client(client_factory: ClientFactory) -> Iterator[TestClient]:
    with client_factory(max_body_bytes=2048) as client:
        yield client


@BOTH
def test_body_over_the_limit(small_client: TestClient, fake_engine: FakeEngine, path: str) -> None:
    body = {"message": "x " * 1500, "messages": [{"role": "user", "content": "x " * 1500}]}
    error = assert_envelope(
        small_client.post(path, json=body), 413, "payload_too_large", "invalid_request_error"
    )
    assert "2048" in error["message"]
    assert fake_engine.requests == []


@BOTH
def test_chunked_body_over_the_limit(small_client: TestClient, path: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"message": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    response = small_client.post(path, content=chunks())
    assert_envelope(response, 413, "payload_too_large")


def test_body_at_the_limit_is_accepted(small_client: TestClient) -> None:
    prefix = {"message": "hi", "padding": ""}
    pad = 2048 - len(json.dumps(prefix).encode())
    body = json.dumps({"message": "hi", "padding": "p" * pad}).encode()
    assert len(body) == 2048
    response = small_client.post("/chat", content=body)
    assert response.status_code == 200
    response = small_client.post("/chat", content=body + b" ")
    assert_envelope(response, 413, "payload_too_large")


@pytest.fixture
def tiny_context(client_factory: ClientFactory) -> Iterator[TestClient]:
    with client_factory(engine=FakeEngine(context_window=128), context_size=128) as client:
        yield client


def test_chat_message_over_the_context_budget(tiny_context: TestClient) -> None:
    response = tiny_context.post("/chat", json={"message": "word " * 100})
    error = assert_envelope(response, 400, "context_length_exceeded", "invalid_request_error")
    assert error["param"] == "message"
    # Nothing was stored, and a message that fits still works.
    ok = tiny_context.post("/chat", json={"message": "word " * 10})
    assert ok.status_code == 200


def test_chat_message_over_the_budget_on_an_existing_session(tiny_context: TestClient) -> None:
    response = tiny_context.post("/chat", json={"message": "hi"})
    session_id = response.text.split('"session_id": "')[1].split('"')[0]
    response = tiny_context.post("/chat", json={"message": "word " * 100, "session_id": session_id})
    assert_envelope(response, 400, "context_length_exceeded")
    messages = tiny_context.get(f"/sessions/{session_id}").json()["messages"]
    assert [m["content"] for m in messages] == ["hi", "fake reply to: hi"]


@pytest.mark.parametrize("stream", [False, True])
def test_completion_over_the_context_window(tiny_context: TestClient, stream: bool) -> None:
    body = {"stream": stream, "messages": [{"role": "user", "content": "word " * 200}]}
    error = assert_envelope(tiny_context.post(COMPLETIONS, json=body), 400)
    assert error["code"] == "context_length_exceeded"
    assert error["param"] == "messages"


# --- routes and methods ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nope"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/embeddings"),
        ("GET", "/sessions"),
        ("GET", "/sessions/"),
        ("GET", "/v1/models/fake-engine"),
    ],
)
def test_unknown_route(shared_client: TestClient, method: str, path: str) -> None:
    error = assert_envelope(shared_client.request(method, path), 404, type_="not_found_error")
    assert path in error["message"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/chat", "POST"),
        ("GET", COMPLETIONS, "POST"),
        ("PUT", COMPLETIONS, "POST"),
        ("POST", "/v1/models", "GET"),
        ("POST", "/health", "GET"),
        ("DELETE", "/ready", "GET"),
        ("POST", "/", "GET"),
    ],
)
def test_wrong_method(shared_client: TestClient, method: str, path: str, allowed: str) -> None:
    response = shared_client.request(method, path)
    error = assert_envelope(response, 405, type_="invalid_request_error")
    assert method in error["message"]
    assert allowed in response.headers["allow"].split(", ")


def test_wrong_method_on_a_session(shared_client: TestClient) -> None:
    assert_envelope(shared_client.put("/sessions/abc"), 405)
    assert_envelope(shared_client.post("/sessions/abc"), 405)


def test_wrong_method_on_a_session_allows_delete(shared_client: TestClient) -> None:
    response = shared_client.put("/sessions/abc")
    assert response.status_code == 405
    assert {"GET", "DELETE"} <= set(response.headers["allow"].split(", "))


# --- before the engine is ready --------------------------------------------------------------


def _not_ready_client(settings_factory: SettingsFactory, engine: FakeEngine) -> TestClient:
    return TestClient(make_app(settings_factory(), engine))


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (COMPLETIONS, {"messages": HI}),
        (COMPLETIONS, {"messages": HI, "stream": True}),
        ("/chat", {"message": "hi"}),
        ("/chat", {"message": "hi", "session_id": "whatever"}),
    ],
)
def test_requests_before_ready_get_503(
    settings_factory: SettingsFactory, path: str, body: dict[str, Any]
) -> None:
    engine = NeverReadyEngine()
    with _not_ready_client(settings_factory, engine) as client:
        assert client.get("/health").status_code == 200
        ready = client.get("/ready")
        assert ready.status_code == 503
        assert ready.headers["retry-after"] == "2"
        assert ready.json()["status"] == "loading"
        assert ready.json()["error"] is None

        response = client.post(path, json=body)
        error = assert_envelope(response, 503, "engine_not_ready", "service_unavailable_error")
        assert "loading" in error["message"]
        assert response.headers["retry-after"] == "2"
    assert engine.requests == []


def test_validation_comes_before_readiness(settings_factory: SettingsFactory) -> None:
    with _not_ready_client(settings_factory, NeverReadyEngine()) as client:
        invalid(client.post("/chat", json={"message": ""}), "message")


def test_engine_that_failed_to_load(settings_factory: SettingsFactory, tmp_path: Path) -> None:
    with _not_ready_client(settings_factory, BrokenEngine()) as client:
        ready = client.get("/ready")
        for _ in range(100):  # loading runs in the background; wait for it to fail
            if ready.json()["status"] != "loading":
                break
            ready = client.get("/ready")
        assert ready.status_code == 503
        body = ready.json()
        assert body["status"] == "failed"
        assert "no model file" in body["error"]
        assert client.get("/health").status_code == 200

        response = client.post("/chat", json={"message": "hi"})
        error = assert_envelope(response, 503, "engine_not_ready")
        assert "no model file" in error["message"]
        assert response.headers["retry-after"] == "30"
        response = client.post(COMPLETIONS, json={"messages": HI})
        assert_envelope(response, 503, "engine_not_ready")
