"""The chat page at ``/`` in a real browser (FakeEngine: only the HTTP layer matters here):
greeting and suggestions, an instant FAQ answer with its label, a streamed reply, reload
keeps the conversation, a 429 retried after its Retry-After, Chinese by browser language,
keyboard only, and axe-core's check."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.browser.conftest import TIMEOUT_MS, PageErrors, send, serious_violations

pytestmark = pytest.mark.browser

LLM_META = re.compile(r"^AI assistant · first word in \d+ ms$")
# A general question (the demo KB does not answer it), so the FakeEngine replies.
QUESTION = "Tell me something about your company history."
FAKE_REPLY = f"fake reply to: {QUESTION}"


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


def test_a_suggested_question_is_answered_instantly_from_the_faq_and_labelled(
    page: Page, page_errors: PageErrors, base_url: str, http: httpx.Client
) -> None:
    page.goto(base_url + "/")
    expect(page.locator("h1")).to_have_text("Lumen Home")
    expect(page.locator(".msg.greeting")).to_contain_text("Lumen Home's assistant")
    suggestions = page.locator("#suggestions button")
    expect(suggestions).to_have_count(4)
    question = suggestions.first.inner_text()

    suggestions.first.click()
    answer = page.locator(".msg.assistant").first
    expect(answer).to_have_attribute("data-tier", "faq")
    expect(answer.locator(".meta")).to_have_text(f"Instant answer from our FAQ: “{question}”")
    expect(page.locator(".msg.user")).to_have_text([question])
    expect(page.locator("#suggestions")).to_have_count(0)  # gone once the customer spoke

    send(page, QUESTION)
    reply = page.locator(".msg.assistant").nth(1)
    expect(reply.locator(".meta")).to_have_text(LLM_META)
    expect(reply).to_contain_text(FAKE_REPLY)
    expect(page.locator("#text")).to_have_value("")

    session_id = page.evaluate("localStorage.getItem('kefu-session')")
    assert isinstance(session_id, str)
    stored = stored_messages(http, session_id, 4)
    assert [m["role"] for m in stored] == ["user", "assistant"] * 2

    page.reload()  # the server's history, labels included
    expect(page.locator(".msg.user, .msg.assistant")).to_have_count(4)
    expect(page.locator(".msg.assistant").first.locator(".meta")).to_have_text(
        f"Instant answer from our FAQ: “{question}”"
    )
    expect(page.locator(".msg.assistant").nth(1)).to_contain_text(FAKE_REPLY)
    send(page, "And the refund?")
    expect(page.locator(".msg.assistant").nth(2)).to_contain_text("fake reply to: And the refund?")
    assert page.evaluate("localStorage.getItem('kefu-session')") == session_id
    messages = stored_messages(http, session_id, 6)
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        question,
        QUESTION,
        "And the refund?",
    ]

    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".msg.user")).to_have_count(0)
    assert page.evaluate("localStorage.getItem('kefu-session')") is None
    page.reload()
    expect(page.locator(".msg.user")).to_have_count(0)
    expect(page.locator("#suggestions button")).to_have_count(4)
    assert page_errors.messages == []


def test_a_busy_server_is_asked_again_after_its_retry_after(
    page: Page, page_errors: PageErrors, base_url: str
) -> None:
    refusals: list[float] = []

    def busy_once(route: Route) -> None:
        if not refusals:
            refusals.append(time.monotonic())
            error = {"message": "busy", "type": "overloaded", "param": None, "code": "busy"}
            route.fulfill(status=503, headers={"retry-after": "2"}, json={"error": error})
        else:
            refusals.append(time.monotonic())
            route.continue_()

    page.route("**/chat", busy_once)
    page.goto(base_url + "/")
    send(page, QUESTION)
    expect(page.locator("#status")).to_have_text(
        re.compile(r"busy right now — trying again in \d s")
    )
    expect(page.locator(".msg.assistant").first).to_contain_text(FAKE_REPLY)
    assert len(refusals) == 2
    assert refusals[1] - refusals[0] >= 1.9  # it waited as told
    expect(page.locator("#status")).to_be_hidden()
    expect(page.locator(".msg.error")).to_have_count(0)
    # The browser logs the refused request itself; nothing else went wrong.
    assert [m for m in page_errors.messages if "status of 503" not in m] == []


def test_keyboard_only_and_no_serious_accessibility_violations(
    page: Page, page_errors: PageErrors, base_url: str
) -> None:
    page.goto(base_url + "/")
    expect(page.locator("#suggestions button")).to_have_count(4)
    assert serious_violations(page) == []

    order = []
    for _ in range(7):  # reset, four suggestions, the message box, send
        page.keyboard.press("Tab")
        order.append(
            page.evaluate("document.activeElement.id || document.activeElement.textContent")
        )
    assert order[0] == "reset"
    assert order[-2:] == ["text", "send"]
    page.keyboard.press("Shift+Tab")
    page.keyboard.type(QUESTION)
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant").first).to_contain_text(FAKE_REPLY)
    assert serious_violations(page) == []  # with a conversation on it too
    assert page_errors.messages == []


def test_chinese_browsers_get_chinese_text(browser: Browser, base_url: str) -> None:
    context = browser.new_context(locale="zh-CN", viewport={"width": 390, "height": 844})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(base_url + "/")
        expect(page.locator("h1")).to_have_text("流明家居")
        expect(page.get_by_role("button", name="发送")).to_be_visible()
        expect(page.locator("#suggestions button")).to_have_count(4)
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        question = page.locator("#suggestions button").first.inner_text()
        assert re.search(r"[\u4e00-\u9fff]", question), question
        page.locator("#suggestions button").first.click()
        expect(page.locator(".msg.assistant .meta")).to_have_text(
            f"即时回答，来自常见问题：“{question}”"
        )
        # A phone-sized window: nothing wider than the screen.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        assert serious_violations(page) == []
    finally:
        context.close()
