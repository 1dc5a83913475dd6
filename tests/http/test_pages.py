"""The pages' server side in process: the chat page's config, the widget's script and
CORS (--allowed-origins), the console's claim so two agents never answer one customer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from starlette.testclient import TestClient

from kefu.settings import Settings
from tests.conftest import ClientFactory
from tests.http.helpers import assert_envelope, parse_sse

SHOP = "http://shop.test:8080"


@pytest.fixture
def pages(client_factory: ClientFactory) -> Iterator[TestClient]:
    with client_factory(fast_path=True, allowed_origins=(SHOP,), shop_name="Acme|艾克美") as c:
        yield c


def page_config(client: TestClient) -> dict[str, object]:
    html = client.get("/").text
    found = re.search(r'<script id="kefu-config" type="application/json">(.*?)</script>', html)
    assert found, "the page carries no config"
    config: dict[str, object] = json.loads(found.group(1))
    return config


def handed_off(client: TestClient) -> str:
    response = client.post("/chat", json={"message": "I want to talk to a human"})
    done = next(e.json() for e in parse_sse(response.text) if e.event == "done")
    assert done["tier"] == "handoff"
    session_id: str = done["session_id"]
    assert client.get(f"/sessions/{session_id}").status_code == 200  # stored
    return session_id


def test_the_page_names_the_shop_and_suggests_the_most_asked(pages: TestClient) -> None:
    config = page_config(pages)
    assert config["shop"] == {"en": "Acme", "zh": "艾克美"}
    suggestions = config["suggestions"]
    assert isinstance(suggestions, dict)
    assert len(suggestions["en"]) == 4
    assert len(suggestions["zh"]) == 4
    # One question asked twice comes first from then on.
    asked = suggestions["en"][-1]
    for _ in range(2):
        done = parse_sse(pages.post("/chat", json={"message": asked}).text)[-1].json()
        assert done["tier"] == "faq"
    after = page_config(pages)["suggestions"]
    assert isinstance(after, dict)
    assert after["en"][0] == asked
    response = pages.get("/")
    assert response.headers["content-security-policy"] == f"frame-ancestors 'self' {SHOP}"
    assert pages.get("/agent").headers["content-security-policy"] == "frame-ancestors 'none'"


def test_the_widget_and_cors_for_allowed_origins_only(pages: TestClient) -> None:
    script = pages.get("/widget.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "attachShadow" in script.text

    config = pages.get("/widget/config", headers={"origin": SHOP})
    assert config.json() == {"shop": {"en": "Acme", "zh": "艾克美"}}
    assert config.headers["access-control-allow-origin"] == SHOP
    other = pages.get("/widget/config", headers={"origin": "http://elsewhere.test"})
    assert "access-control-allow-origin" not in other.headers

    preflight = pages.options(
        "/chat",
        headers={
            "origin": SHOP,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, authorization",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == SHOP
    refused = pages.options(
        "/chat",
        headers={"origin": "http://elsewhere.test", "access-control-request-method": "POST"},
    )
    assert refused.status_code == 400
    chat = pages.post("/chat", json={"message": "hi"}, headers={"origin": SHOP})
    assert chat.headers["access-control-allow-origin"] == SHOP
    assert "retry-after" in chat.headers["access-control-expose-headers"].lower()


def test_without_allowed_origins_there_is_no_cors(client: TestClient) -> None:
    response = client.get("/widget/config", headers={"origin": SHOP})
    assert "access-control-allow-origin" not in response.headers
    assert client.get("/").headers["content-security-policy"] == "frame-ancestors 'self'"


def test_allowed_origins_must_be_origins() -> None:
    with pytest.raises(ValidationError, match="is not an origin"):
        Settings.model_validate({"allowed_origins": ["shop.example/path"]})
    trimmed = Settings.model_validate({"allowed_origins": "https://a.example/"})
    assert trimmed.allowed_origins == ("https://a.example",)


def test_one_agent_claims_a_conversation_and_the_other_cannot_answer(pages: TestClient) -> None:
    session_id = handed_off(pages)
    claimed = pages.post(f"/agent/sessions/{session_id}/claim", json={"agent": "mei"})
    assert claimed.status_code == 200, claimed.text
    assert claimed.json() == {"session_id": session_id, "agent": "mei"}
    assert pages.post(f"/agent/sessions/{session_id}/claim", json={"agent": "mei"}).is_success

    listed = pages.get("/agent/sessions").json()["sessions"]
    assert [(w["session_id"], w["claimed_by"]) for w in listed] == [(session_id, "mei")]

    taken = pages.post(f"/agent/sessions/{session_id}/claim", json={"agent": "li"})
    assert_envelope(taken, 409, code="session_conflict")
    assert "'mei'" in taken.json()["error"]["message"]
    answer = pages.post(f"/agent/sessions/{session_id}/reply", json={"message": "x", "agent": "li"})
    assert_envelope(answer, 409, code="session_conflict")
    mine = pages.post(f"/agent/sessions/{session_id}/reply", json={"message": "Hi", "agent": "mei"})
    assert mine.status_code == 201

    assert pages.post(f"/agent/sessions/{session_id}/release").status_code == 204
    # Handed off again later, the conversation is free for anyone.
    pages.post("/chat", json={"message": "a human please", "session_id": session_id})
    assert pages.get(f"/sessions/{session_id}").json()["state"] == "handoff"
    again = pages.post(f"/agent/sessions/{session_id}/claim", json={"agent": "li"})
    assert again.status_code == 200, again.text


def test_claim_errors(pages: TestClient) -> None:
    assert_envelope(pages.post("/agent/sessions/nope/claim", json={"agent": "mei"}), 404)
    session_id = handed_off(pages)
    assert_envelope(pages.post(f"/agent/sessions/{session_id}/claim", json={}), 400)
    blank = pages.post(f"/agent/sessions/{session_id}/claim", json={"agent": "  "})
    assert_envelope(blank, 400)
