"""Session resources (GET/DELETE /sessions/{id}) and turns of one session running at once."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from kefu.engine.fake import FakeEngine
from kefu.settings import DEFAULT_PERSONA
from tests.conftest import ClientFactory
from tests.http.helpers import (
    GatedEngine,
    SettingsFactory,
    assert_envelope,
    make_app,
    parse_sse,
    serve,
    wait_until,
)


def chat(client: TestClient, message: str, session_id: str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {"message": message, **extra}
    if session_id is not None:
        body["session_id"] = session_id
    response = client.post("/chat", json=body)
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1].event == "done"
    sid: str = events[-1].json()["session_id"]
    return sid


def done_payload(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1].event == "done", response.text
    payload: dict[str, Any] = events[-1].json()
    return payload


# --- GET / DELETE ----------------------------------------------------------------------------


def test_get_session(client: TestClient) -> None:
    session_id = chat(client, "where is my parcel", user_id="customer-7")
    chat(client, "thanks", session_id)
    response = client.get(f"/sessions/{session_id}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {
        "session_id",
        "user_id",
        "created_at",
        "updated_at",
        "state",
        "state_reason",
        "state_since",
        "memory",
        "messages",
    }
    assert body["memory"] is None  # two turns: nothing has left the prompt yet
    assert body["state"] == "bot"
    assert body["session_id"] == session_id
    assert body["user_id"] == "customer-7"
    assert body["created_at"] <= body["updated_at"]
    messages = body["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "where is my parcel"),
        ("assistant", "fake reply to: where is my parcel"),
        ("user", "thanks"),
        ("assistant", "fake reply to: thanks"),
    ]
    for m in messages:
        assert set(m) == {"role", "content", "created_at", "turn", "meta"}
    assert messages[0]["meta"] == {}
    meta = messages[1]["meta"]
    assert meta["tier"] == "llm"
    assert meta["finish_reason"] == "stop"
    assert "e2e_ms" in meta["timings"]
    assert "ttft_ms" in meta["timings"]


def test_length_finish_is_stored(client_factory: ClientFactory) -> None:
    with client_factory(engine=FakeEngine(reply_words=20), max_tokens=3) as client:
        session_id = chat(client, "hi")
        messages = client.get(f"/sessions/{session_id}").json()["messages"]
    assert messages[1]["content"] == "w0 w1 w2"
    assert messages[1]["meta"]["finish_reason"] == "length"


def test_delete_session(client: TestClient) -> None:
    session_id = chat(client, "hi")
    response = client.delete(f"/sessions/{session_id}")
    assert response.status_code == 204
    assert response.content == b""
    assert_envelope(client.get(f"/sessions/{session_id}"), 404, "not_found", "not_found_error")
    assert_envelope(client.delete(f"/sessions/{session_id}"), 404, "not_found")
    # The id is gone for /chat too.
    error = assert_envelope(
        client.post("/chat", json={"message": "hi", "session_id": session_id}), 404, "not_found"
    )
    assert error["param"] == "session_id"


def test_delete_leaves_other_sessions(client: TestClient) -> None:
    keep = chat(client, "keep")
    drop = chat(client, "drop")
    assert client.delete(f"/sessions/{drop}").status_code == 204
    messages = client.get(f"/sessions/{keep}").json()["messages"]
    assert [m["content"] for m in messages] == ["keep", "fake reply to: keep"]


@pytest.mark.parametrize("session_id", ["nope", "0" * 32, "a%20b", "%E4%BD%A0"])
def test_unknown_session(client: TestClient, session_id: str) -> None:
    error = assert_envelope(client.get(f"/sessions/{session_id}"), 404, "not_found")
    assert error["type"] == "not_found_error"
    assert error["param"] == "session_id"
    assert_envelope(client.delete(f"/sessions/{session_id}"), 404, "not_found")


def test_chat_on_unknown_session(client: TestClient, fake_engine: FakeEngine) -> None:
    response = client.post("/chat", json={"message": "hi", "session_id": "0" * 32})
    error = assert_envelope(response, 404, "not_found", "not_found_error")
    assert error["param"] == "session_id"
    assert fake_engine.requests == []


# --- turns of one session at once ------------------------------------------------------------


async def _session(client: httpx.AsyncClient, engine: GatedEngine) -> str:
    """A session with one finished turn ("m0"); the gate is closed afterwards."""
    engine.release()
    response = await client.post("/chat", json={"message": "m0"})
    session_id: str = done_payload(response)["session_id"]
    engine.close_gate()
    return session_id


@pytest.mark.anyio
async def test_turns_of_one_session_are_serialised(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(), engine)
    async with serve(app) as client:
        session_id = await _session(client, engine)
        first = asyncio.create_task(
            client.post("/chat", json={"message": "A", "session_id": session_id})
        )
        await wait_until(lambda: ("start", "A") in engine.log)
        second = asyncio.create_task(
            client.post("/chat", json={"message": "B", "session_id": session_id})
        )
        await asyncio.sleep(0.05)
        assert engine.log == [("start", "A")], "B reached the engine while A was running"
        assert not second.done()

        engine.release()
        a, b = done_payload(await first), done_payload(await second)

    assert engine.log == [("start", "A"), ("end", "A"), ("start", "B"), ("end", "B")]
    assert a["reply"] == "fake reply to: A"
    assert b["reply"] == "fake reply to: B"
    # B read the history after A was stored.
    contents = [m.content for m in engine.seen[-1].messages]
    assert contents == [DEFAULT_PERSONA, "m0", "fake reply to: m0", "A", "fake reply to: A", "B"]


@pytest.mark.anyio
async def test_other_sessions_are_not_blocked(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(), engine)
    async with serve(app) as client:
        session_id = await _session(client, engine)
        first = asyncio.create_task(
            client.post("/chat", json={"message": "A", "session_id": session_id})
        )
        await wait_until(lambda: ("start", "A") in engine.log)
        other = asyncio.create_task(client.post("/chat", json={"message": "other"}))
        await wait_until(lambda: ("start", "other") in engine.log)
        engine.release()
        done_payload(await first)
        done_payload(await other)


@pytest.mark.anyio
async def test_busy_session_gets_409(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(session_wait=0.05), engine)
    async with serve(app) as client:
        session_id = await _session(client, engine)
        first = asyncio.create_task(
            client.post("/chat", json={"message": "A", "session_id": session_id})
        )
        await wait_until(lambda: ("start", "A") in engine.log)
        response = await client.post("/chat", json={"message": "B", "session_id": session_id})
        error = assert_envelope(response, 409, "session_busy", "conflict_error")
        assert error["param"] == "session_id"
        assert not first.done()

        engine.release()
        done_payload(await first)
        stored = (await client.get(f"/sessions/{session_id}")).json()["messages"]
    assert [m["content"] for m in stored] == ["m0", "fake reply to: m0", "A", "fake reply to: A"]
    assert ("start", "B") not in engine.log


@pytest.mark.anyio
async def test_delete_waits_for_the_running_turn(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(), engine)
    async with serve(app) as client:
        session_id = await _session(client, engine)
        turn = asyncio.create_task(
            client.post("/chat", json={"message": "A", "session_id": session_id})
        )
        await wait_until(lambda: ("start", "A") in engine.log)
        delete = asyncio.create_task(client.delete(f"/sessions/{session_id}"))
        await asyncio.sleep(0.05)
        assert not delete.done(), "the session was deleted under a running turn"

        engine.release()
        done_payload(await turn)
        assert (await delete).status_code == 204
        assert (await client.get(f"/sessions/{session_id}")).status_code == 404


@pytest.mark.anyio
async def test_second_message_while_the_first_turn_of_a_new_session_runs(
    settings_factory: SettingsFactory,
) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(), engine)
    async with serve(app) as client:
        first = asyncio.create_task(client.post("/chat", json={"message": "A"}))
        await wait_until(lambda: bool(engine.seen))
        # The client has the id from the "meta" event by now; the request id is the same.
        session_id = engine.seen[0].request_id
        second = asyncio.create_task(
            client.post("/chat", json={"message": "B", "session_id": session_id})
        )
        await asyncio.sleep(0.05)
        engine.release()
        a, b = await first, await second
        done_payload(a)
        assert b.status_code == 200, b.text
        payload = done_payload(b)
    assert payload["session_id"] == session_id
    assert [m.content for m in engine.seen[-1].messages][-3:] == ["A", "fake reply to: A", "B"]
