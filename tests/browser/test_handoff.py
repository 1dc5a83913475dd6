"""The chat page at ``/`` with the fast path: a KB answer, then a handoff to a human agent
whose replies appear in the page as they are sent, and stay there after a reload."""

from __future__ import annotations

import csv
import re
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from kefu.fastpath.hours import ServiceHours
from kefu.settings import Settings
from tests.browser.conftest import PageErrors

pytestmark = pytest.mark.browser

HANDOFF = "I want to talk to a human"


def agents_open() -> bool:
    return ServiceHours.parse(Settings.model_validate({}).service_hours).is_open(datetime.now(UTC))


AGENT_TEXT = "Hi, I'm Mei from Lumen Home. I'll look into this for you."
# The page's own EventSource: open (1) once the server has the customer's stream.
STREAM_SETTLED = "() => agentEvents !== null && agentEvents.readyState !== EventSource.CONNECTING"


def first_demo_entry() -> dict[str, str]:
    text = resources.files("kefu.knowledge").joinpath("demo/shop_en.csv").read_text("utf-8")
    return next(csv.DictReader(text.splitlines()))


def send(page: Page, message: str) -> None:
    page.fill("#text", message)
    page.get_by_role("button", name="Send").click()


def wait_for_agent_stream(page: Page) -> None:
    page.wait_for_function(STREAM_SETTLED)
    state = page.evaluate("agentEvents.readyState")
    assert state == 1, f"the page's event stream did not open (readyState {state})"


def test_faq_answer_then_handoff_and_the_agents_reply_appears_live(
    page: Page, page_errors: PageErrors, base_url: str, http: httpx.Client, tmp_path: Path
) -> None:
    entry = first_demo_entry()
    page.goto(base_url + "/")

    send(page, entry["question"])
    faq = page.locator(".msg.assistant").first
    expect(faq.locator(".meta")).to_have_text(re.compile(r"^faq\b"))
    expect(faq).to_contain_text(entry["answer"])

    send(page, HANDOFF)
    # A "waiting" notice shows only within service hours (the reply gives the hours).
    expect(page.locator(".msg.notice")).to_have_count(0 if not agents_open() else 1)
    handoff = page.locator(".msg.assistant").nth(1)
    expect(handoff.locator(".meta")).to_have_text(re.compile(r"^handoff\b"))
    session_id = page.evaluate("localStorage.getItem('kefu-session')")
    assert isinstance(session_id, str)
    assert session_id
    wait_for_agent_stream(page)

    sent = http.post(
        f"/agent/sessions/{session_id}/reply", json={"message": AGENT_TEXT, "agent": "mei"}
    )
    assert sent.status_code == 201, sent.text
    assert sent.json()["delivered"] == 1  # the page's stream
    agent = page.locator(".msg.agent")
    expect(agent).to_have_count(1)
    expect(agent).to_contain_text(AGENT_TEXT)
    expect(agent.locator(".meta")).to_have_text("human agent · mei")
    page.screenshot(path=tmp_path / "handoff.png")

    # The conversation is the server's: a reload shows it, the agent's reply included.
    handoff_reply = handoff.evaluate("el => el.firstChild.textContent")
    page.reload()
    expect(page.locator(".msg")).to_have_text(
        [
            entry["question"],
            entry["answer"],
            HANDOFF,
            handoff_reply,
            AGENT_TEXT + "human agent · mei",
        ]
    )
    expect(page.locator(".msg").nth(4)).to_have_class("msg agent")

    # The reloaded page still listens while the agent owns the conversation.
    wait_for_agent_stream(page)
    assert http.post(f"/agent/sessions/{session_id}/release").status_code == 204
    expect(page.locator(".msg.notice")).to_have_text("The assistant is back.")
    assert page_errors.messages == []
