"""The widget on a shop's own site, another origin than kefu's (--allowed-origins): one
script tag, a launcher whose label is read across origins (CORS), the chat in an iframe that
the shop's CSS cannot touch, an FAQ answer inside it, and an unread badge for an agent's
reply that arrives while it is closed."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Frame, Page, expect

from tests.browser.conftest import PageErrors, ShopSite, send, serious_violations

pytestmark = pytest.mark.browser

HANDOFF = "I want to talk to a human"


def chat_frame(page: Page, base_url: str) -> Frame:
    frame = next((f for f in page.frames if f.url.startswith(base_url + "/?embed")), None)
    assert frame is not None, [f.url for f in page.frames]
    return frame


def test_the_widget_on_another_origin_answers_and_counts_unread_agent_replies(
    page: Page, page_errors: PageErrors, base_url: str, shop_site: ShopSite, http: httpx.Client
) -> None:
    page.goto(shop_site.url + "/")
    launcher = page.locator("[data-kefu-widget] .launcher")
    # The shop's name came from kefu's /widget/config: a cross-origin read CORS allowed.
    expect(launcher).to_have_attribute("aria-label", "Chat with Lumen Home")
    expect(
        launcher
    ).to_be_visible()  # the shop's `button { display: none }` stops at the shadow root
    assert serious_violations(page) == []

    launcher.click()
    expect(launcher).to_have_attribute("aria-expanded", "true")
    panel = page.locator("[data-kefu-widget] .panel")
    box = panel.bounding_box()
    assert box is not None
    assert box["width"] >= 300  # the shop's `iframe { width: 1px }` does not reach it either
    assert box["height"] >= 400
    frame = chat_frame(page, base_url)
    expect(frame.locator("h1")).to_have_text("Lumen Home")
    question = frame.locator("#suggestions button").first.inner_text()
    send(frame, question)
    answer = frame.locator(".msg.assistant").first
    expect(answer).to_have_attribute("data-tier", "faq")
    expect(answer.locator(".meta")).to_contain_text("Instant answer from our FAQ")
    assert serious_violations(frame) == []

    send(frame, HANDOFF)
    expect(frame.locator(".msg.assistant").nth(1)).to_have_attribute("data-tier", "handoff")
    frame.wait_for_function("() => agentEvents && agentEvents.readyState === EventSource.OPEN")
    session_id = frame.evaluate("sessionId")
    frame.get_by_role("button", name="Close chat").click()
    expect(launcher).to_have_attribute("aria-expanded", "false")
    expect(panel).to_be_hidden()

    for text in ("Hi, Mei here.", "Could you tell me your order number?"):
        sent = http.post(
            f"/agent/sessions/{session_id}/reply", json={"message": text, "agent": "mei"}
        )
        assert sent.status_code == 201, sent.text
    badge = page.locator("[data-kefu-widget] .badge")
    expect(badge).to_have_text("2")
    expect(launcher).to_have_attribute("aria-label", "Chat with Lumen Home (2 new)")

    launcher.click()
    expect(badge).to_be_hidden()
    expect(frame.locator(".msg.agent")).to_have_count(2)

    # This Chromium denies the cross-site iframe its storage: the shop's page keeps the
    # conversation's id, so a reload of the shop's page shows the conversation again.
    page.reload()
    page.locator("[data-kefu-widget] .launcher").click()
    frame = chat_frame(page, base_url)
    expect(frame.locator(".msg.user")).to_have_text([question, HANDOFF])
    expect(frame.locator(".msg.agent")).to_have_count(2)
    assert page_errors.messages == []
