"""/openapi.json: complete (every route of the app), valid OpenAPI 3.1, true to what the
routes send (SSE events included), secured as the auth policy says; /docs renders it offline."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR
from starlette.routing import Route
from starlette.testclient import TestClient

from kefu.engine.fake import FakeEngine
from kefu.settings import Settings
from tests.conftest import wait_ready
from tests.http.helpers import SseEvent, make_app, parse_sse


def test_every_route_is_documented(shared_client: TestClient) -> None:
    document = shared_client.get("/openapi.json").json()
    app = shared_client.app
    routes = {
        (method.lower(), route.path)
        for route in app.routes  # type: ignore[attr-defined]
        if isinstance(route, Route)
        for method in (route.methods or set()) - {"HEAD"}
    }
    documented = {(method, path) for path, item in document["paths"].items() for method in item}
    assert routes == documented
    undeclared = [
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if operation.get("x-undeclared")
    ]
    assert not undeclared, f"add these to kefu/api/openapi/operations.py: {undeclared}"
    # The surfaces the issue names, so a refactor cannot drop one silently.
    for path in ("/chat", "/v1/chat/completions", "/kb", "/agent/sessions", "/metrics"):
        assert path in document["paths"]


def test_the_document_is_valid_openapi_3_1(shared_client: TestClient) -> None:
    response = shared_client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    errors = [str(e) for e in OPENAPI_31_VALIDATOR.iter_errors(document)]
    assert not errors, errors[:5]
    for schema in document["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    # Every error of every operation is the one envelope (/ready's 503 is its probe body).
    for path, item in document["paths"].items():
        for operation in item.values():
            for status, reply in operation["responses"].items():
                if int(status) >= 400 and path != "/ready":
                    schema = reply["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, path


def test_the_document_is_generated_from_the_wire_models(shared_client: TestClient) -> None:
    """A constraint of a pydantic model shows up as it is: nothing is copied by hand."""
    schemas = shared_client.get("/openapi.json").json()["components"]["schemas"]
    request = schemas["ChatCompletionRequest"]["properties"]
    assert request["max_tokens"]["anyOf"][0] == {"minimum": 1, "type": "integer"}
    assert schemas["ChatRequest"]["required"] == ["message"]
    assert set(schemas["ErrorEnvelope"]["properties"]) == {"error"}


def _stream_validator(document: dict[str, Any], path: str) -> Any:
    content = document["paths"][path]["post"]["responses"]["200"]["content"]
    schema = content["text/event-stream"]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": document["components"]})


def _check_events(document: dict[str, Any], path: str, events: list[SseEvent]) -> set[str]:
    """Each event against the document: its name is declared, its data matches its schema."""
    validator = _stream_validator(document, path)
    seen = set()
    for event in events:
        name = event.event or "message"
        instance = {"event": name, "data": event.data}
        validator.validate(instance)  # the event and data's shape (a literal or a string)
        variants = [
            v for v in validator.schema["anyOf"] if v["properties"]["event"].get("const") == name
        ]
        assert variants, f"{path}: undocumented event {name!r}"
        content = [
            v["properties"]["data"] for v in variants if "contentSchema" in v["properties"]["data"]
        ]
        if event.data != "[DONE]":
            payload = jsonschema.Draft202012Validator(
                {**content[0]["contentSchema"], "components": document["components"]}
            )
            payload.validate(json.loads(event.data))
        seen.add(name)
    return seen


def test_chat_and_completion_streams_match_their_documented_events(
    shared_client: TestClient,
) -> None:
    document = shared_client.get("/openapi.json").json()
    response = shared_client.post("/chat", json={"message": "where is my parcel"})
    assert response.status_code == 200, response.text
    assert _check_events(document, "/chat", parse_sse(response.text)) == {"meta", "token", "done"}
    response = shared_client.post(
        "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "hi there"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert response.status_code == 200, response.text
    assert _check_events(document, "/v1/chat/completions", parse_sse(response.text)) == {"message"}


def test_a_stream_that_breaks_the_document_is_caught(shared_client: TestClient) -> None:
    """The check above can fail: an undocumented field type is refused."""
    document = shared_client.get("/openapi.json").json()
    bad = [SseEvent("done", json.dumps({"session_id": 1}))]
    with pytest.raises(jsonschema.ValidationError):
        _check_events(document, "/chat", bad)


def test_security_follows_the_auth_policy(tmp_path: Path) -> None:
    values: dict[str, Any] = {
        "engine": ("fake",),
        "data_dir": tmp_path,
        "fast_path": False,
        "auth": "keys",
    }
    settings = Settings(**values)
    with TestClient(make_app(settings, FakeEngine())) as client:
        wait_ready(client)
        open_doc = client.get("/openapi.json")  # public, like the probes
        assert open_doc.status_code == 200
        document = open_doc.json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["apiKey"] == {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    paths = document["paths"]
    assert paths["/health"]["get"]["security"] == []
    assert paths["/chat"]["post"]["security"] == [{"bearer": ["chat"]}, {"apiKey": ["chat"]}]
    assert paths["/kb/import"]["post"]["x-scope"] == "admin"
    assert "429" in paths["/chat"]["post"]["responses"]
    assert "401" in paths["/v1/models"]["get"]["responses"]
    assert {"accessToken": ["chat"]} in paths["/sessions/{session_id}/events"]["get"]["security"]


def test_without_auth_the_document_asks_for_none(shared_client: TestClient) -> None:
    document = shared_client.get("/openapi.json").json()
    assert "securitySchemes" not in document["components"]
    assert all(
        operation["security"] == []
        for item in document["paths"].values()
        for operation in item.values()
    )


def test_the_api_page_is_served_offline(shared_client: TestClient) -> None:
    response = shared_client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    # Nothing fetched from elsewhere: no CDN script, style or font.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", response.text)
    assert "@import" not in response.text
    assert 'fetch("openapi.json")' in response.text
