"""The agent console at ``/agent`` with the chat page: a customer asks for a human, an agent
in a second browser context takes the conversation and answers, the reply appears live in
the customer's page (and after a reload), a second agent cannot answer the same customer,
the customer's next message reaches the console, and handing back tells the customer."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Browser, Page, expect

from kefu import demo
from kefu.fastpath.hours import ServiceHours
from tests.browser.conftest import TIMEOUT_MS, PageErrors, send, serious_violations

pytestmark = pytest.mark.browser

HANDOFF = "I want to talk to a human"
AGENT_TEXT = "Hi, I'm Mei from Lumen Home. I'll look into this for you."
# The page's own EventSource: open (1) once the server has the customer's stream.
STREAM_OPEN = "() => agentEvents !== null && agentEvents.readyState === EventSource.OPEN"


def agents_open() -> bool:
    """Whether the demo shop the server answers as has its agents at work now."""
    return ServiceHours.parse(demo.SERVICE_HOURS).is_open(datetime.now(UTC))


@pytest.fixture
def console(browser: Browser, base_url: str) -> Iterator[tuple[Page, Page]]:
    """Two agents' consoles, each in a browser context of its own: mei and li."""
    contexts = [browser.new_context(viewport={"width": 1280, "height": 800}) for _ in range(2)]
    pages = []
    for context, name in zip(contexts, ["mei", "li"], strict=True):
        context.set_default_timeout(TIMEOUT_MS)
        agent = context.new_page()
        agent.goto(base_url + "/agent")
        agent.fill("#agent-name", name)
        pages.append(agent)
    try:
        yield pages[0], pages[1]
    finally:
        for context in contexts:
            context.close()


def test_an_agent_takes_the_customer_and_the_reply_appears_live(
    page: Page, page_errors: PageErrors, base_url: str, console: tuple[Page, Page]
) -> None:
    mei, li = console
    page.goto(base_url + "/")
    send(page, HANDOFF)
    handoff = page.locator(".msg.assistant").first
    expect(handoff).to_have_attribute("data-tier", "handoff")
    # The waiting notice shows within service hours (outside them the reply gives the hours).
    expect(page.locator(".msg.notice")).to_have_count(1 if agents_open() else 0)
    if agents_open():
        expect(page.locator("#status")).to_have_text("Waiting for a human agent…")
    session_id = page.evaluate("localStorage.getItem('kefu-session')")
    assert isinstance(session_id, str)
    page.wait_for_function(STREAM_OPEN)

    # The console was open before the customer asked: the arrival shows without a reload.
    waiting = mei.locator(f'#queue button[data-session="{session_id}"]')
    expect(waiting).to_contain_text(HANDOFF)
    expect(waiting).to_contain_text("nobody has taken it")
    waiting.click()
    expect(mei.locator("#why")).to_contain_text("Why the bot handed over:")
    mei.get_by_role("button", name="Take this conversation").click()
    expect(waiting).to_contain_text("you are answering")
    mei.fill("#reply", AGENT_TEXT)
    mei.keyboard.press("Enter")

    agent = page.locator(".msg.agent")
    expect(agent).to_have_count(1)
    expect(agent).to_contain_text(AGENT_TEXT)
    expect(agent.locator(".meta")).to_have_text("Human agent · mei")
    expect(page.locator("#status")).to_have_text("You're chatting with mei.")
    expect(mei.locator("#messages .msg.agent")).to_contain_text(AGENT_TEXT)
    assert serious_violations(mei) == []

    # The second agent sees who answers, and cannot take the customer too.
    theirs = li.locator(f'#queue button[data-session="{session_id}"]')
    expect(theirs).to_contain_text("mei is answering")
    theirs.click()
    expect(li.get_by_role("button", name="Take this conversation")).to_be_disabled()
    expect(li.locator("#reply-form")).to_be_hidden()

    # The conversation is the server's: a reload shows it, the agent's reply included.
    page.reload()
    expect(page.locator(".msg.agent")).to_have_text([AGENT_TEXT + "Human agent · mei"])
    page.wait_for_function(STREAM_OPEN)
    send(page, "It's about order LH-100234")
    expect(mei.locator("#messages .msg.user").last).to_contain_text("LH-100234")

    mei.get_by_role("button", name="Hand back to the bot").click()
    expect(page.locator(".msg.notice").last).to_have_text("The assistant is back.")
    expect(page.locator("#status")).to_be_hidden()
    expect(waiting).to_have_count(0)
    expect(theirs).to_have_count(0)
    assert page_errors.messages == []
