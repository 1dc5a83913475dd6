"""The chat page at ``/`` in a real browser: send, stream, meta line, reload keeps the session."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PageErrors

pytestmark = pytest.mark.browser

META = re.compile(r"^llm · first word \d+ ms · \d+ tokens$")
# A general question (the demo KB does not answer it), so the FakeEngine replies.
QUESTION = "Tell me something about your company history."
FAKE_REPLY = f"fake reply to: {QUESTION}"


def send(page: Page, message: str) -> None:
    page.fill("#text", message)
    page.get_by_role("button", name="Send").click()


def stored_messages(http: httpx.Client, session_id: str, count: int) -> list[dict[str, Any]]:
    """The session's messages once ``count`` are stored (the turn is written after ``done``)."""
    deadline = time.monotonic() + 5.0
    while True:
        response = http.get(f"/sessions/{session_id}")
        if response.status_code == 200:
            messages: list[dict[str, Any]] = response.json()["messages"]
            if len(messages) >= count:
                return messages
        if time.monotonic() > deadline:
            raise AssertionError(f"session {session_id} not stored: {response.text}")
        time.sleep(0.05)


def test_chat_streams_a_reply_and_reload_keeps_the_conversation(
    page: Page, page_errors: PageErrors, base_url: str, http: httpx.Client
) -> None:
    page.goto(base_url + "/")
    send(page, QUESTION)

    reply = page.locator(".msg.assistant").first
    meta = reply.locator(".meta")
    expect(meta).to_have_text(META)
    expect(reply).to_contain_text(FAKE_REPLY)
    expect(page.locator(".msg.user")).to_have_text([QUESTION])
    expect(page.locator("#text")).to_have_value("")

    session_id = page.evaluate("localStorage.getItem('kefu-session')")
    assert isinstance(session_id, str)
    assert session_id
    stored = stored_messages(http, session_id, 2)
    assert [m["role"] for m in stored] == ["user", "assistant"]

    page.reload()
    expect(page.locator(".msg")).to_have_text([QUESTION, FAKE_REPLY])
    assert page.locator(".msg.assistant").get_attribute("class") == "msg assistant"

    # The reloaded page goes on with the same session.
    send(page, "And the refund?")
    expect(page.locator(".msg.assistant").nth(1).locator(".meta")).to_have_text(META)
    expect(page.locator(".msg.assistant").nth(1)).to_contain_text("fake reply to: And the refund?")
    assert page.evaluate("localStorage.getItem('kefu-session')") == session_id
    messages = stored_messages(http, session_id, 4)
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        QUESTION,
        "And the refund?",
    ]
    assert page_errors.messages == []


def test_new_conversation_forgets_the_session(page: Page, base_url: str) -> None:
    page.goto(base_url + "/")
    send(page, "What do you think about rainy weather?")
    expect(page.locator(".msg.assistant .meta")).to_have_text(META)
    assert page.evaluate("localStorage.getItem('kefu-session')")

    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".msg")).to_have_count(0)
    assert page.evaluate("localStorage.getItem('kefu-session')") is None
    page.reload()
    expect(page.locator("#text")).to_be_visible()
    expect(page.locator(".msg")).to_have_count(0)
