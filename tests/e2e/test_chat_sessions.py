"""POST /chat over SSE on the real model: turn order, session history, and surviving a restart."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e.support import Stopped, chat_stream

pytestmark = pytest.mark.e2e

USER_ID = "customer-42"
# General questions: the LLM answers them (a KB question or an order number would not).
MESSAGES = [
    "Hi, I ordered a blue jacket last week. When will it come?",
    "The order number is 12345.",
    "Thanks! Can I return it if it does not fit?",
]
FOURTH = "And does it come in other colours?"


@dataclass(frozen=True)
class TurnResult:
    message: str
    events: list[str]  # event names in the order they arrived
    meta: dict[str, Any]
    tokens: list[str]
    done: dict[str, Any]


def chat_turn(http: httpx.Client, message: str, session_id: str | None = None) -> TurnResult:
    frames = chat_stream(http, message, session_id, user_id=USER_ID)
    events = [frame.event or "" for frame in frames]
    assert set(events[1:-1]) == {"token"}, f"only tokens between meta and done: {events}"
    tokens = [frame.json()["text"] for frame in frames[1:-1]]
    assert all(isinstance(t, str) and t for t in tokens), tokens
    return TurnResult(message, events, frames[0].json(), tokens, frames[-1].json())


def check_turn(turn: TurnResult, session_id: str) -> None:
    assert turn.meta["session_id"] == session_id
    assert turn.done["session_id"] == session_id
    assert turn.done["reply"] == "".join(turn.tokens)
    assert turn.done["reply"].strip(), "an empty reply"
    assert turn.done["tier"] == "llm"
    usage = turn.done["usage"]
    assert usage["prompt_tokens"] > 0
    assert usage["completion_tokens"] > 0


def three_turns(http: httpx.Client) -> tuple[str, list[TurnResult]]:
    # The opening carries the customer's own number, which the answer cache never stores:
    # asked again by the next test, it still goes to the model.
    first = chat_turn(http, f"I'm customer C{uuid.uuid4().int % 10**6:06d}. {MESSAGES[0]}")
    session_id = first.meta["session_id"]
    assert isinstance(session_id, str)
    assert session_id
    turns = [first] + [chat_turn(http, m, session_id) for m in MESSAGES[1:]]
    for turn in turns:
        check_turn(turn, session_id)
    return session_id, turns


def get_session(http: httpx.Client, session_id: str) -> dict[str, Any]:
    response = http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def expected_messages(turns: list[TurnResult]) -> list[tuple[str, str]]:
    pairs = []
    for turn in turns:
        pairs += [("user", turn.message), ("assistant", turn.done["reply"])]
    return pairs


def role_content(session: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in session["messages"]]


def test_three_turns_stream_in_order_and_are_stored(http: httpx.Client) -> None:
    session_id, turns = three_turns(http)

    session = get_session(http, session_id)
    assert session["session_id"] == session_id
    assert session["user_id"] == USER_ID
    assert len(session["messages"]) == 6
    assert [m["role"] for m in session["messages"]] == ["user", "assistant"] * 3
    assert role_content(session) == expected_messages(turns)
    stamps = [m["created_at"] for m in session["messages"]]
    assert stamps == sorted(stamps)
    for message in session["messages"][1::2]:
        assert message["meta"]["finish_reason"] in {"stop", "length"}


def test_unknown_session_is_404(http: httpx.Client) -> None:
    response = http.post("/chat", json={"message": "hello", "session_id": "no-such-session"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert http.get("/sessions/no-such-session").status_code == 404


def test_session_survives_restart(
    http: httpx.Client, restart_server: Callable[[], Stopped]
) -> None:
    session_id, turns = three_turns(http)
    before = get_session(http, session_id)
    assert role_content(before) == expected_messages(turns)

    stopped = restart_server()

    assert not stopped.killed, "kefu did not exit within 10 s of SIGTERM"
    assert stopped.returncode in {0, -signal.SIGTERM}, stopped
    after = get_session(http, session_id)
    assert after == before

    fourth = chat_turn(http, FOURTH, session_id)
    check_turn(fourth, session_id)
    session = get_session(http, session_id)
    assert len(session["messages"]) == 8
    assert session["messages"][:6] == before["messages"]
    assert role_content(session)[6:] == [("user", FOURTH), ("assistant", fourth.done["reply"])]
