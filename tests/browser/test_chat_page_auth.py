"""The chat page when the server asks for keys: it carries a visitor token of its own,
keeps the conversation over a reload, and receives an agent's reply on its live stream
(EventSource, the token in the query)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import TIMEOUT_MS, PageErrors
from tests.e2e.support import KefuServer

pytestmark = pytest.mark.browser

QUESTION = "Tell me something about your company history."
STREAM_SETTLED = "() => agentEvents !== null && agentEvents.readyState === EventSource.OPEN"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KefuServer, str]]:
    base = tmp_path_factory.mktemp("kefu-keyed")
    data = base / "data"
    data.mkdir()
    created = subprocess.run(
        [sys.executable, "-m", "kefu", "keys", "create", "--data-dir", str(data),
         "--name", "desk", "--scope", "admin"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    admin = created.stdout.strip().splitlines()[-1]
    server = KefuServer(
        data, base / "kefu.log", ["--engine", "fake", "--auth", "keys", "--no-second-look"]
    )
    server.start()
    try:
        yield server, admin
    finally:
        server.stop()


def send(page: Page, message: str) -> None:
    page.fill("#text", message)
    page.get_by_role("button", name="Send").click()


def test_the_console_needs_a_key_with_the_admin_scope(
    browser: Browser, keyed: tuple[KefuServer, str]
) -> None:
    server, admin = keyed
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        console = context.new_page()
        console.goto(server.url + "/agent")
        expect(console.locator("#notice")).to_have_text(
            "The server wants an API key with the admin scope."
        )
        console.fill("#agent-name", "mei")
        console.fill("#api-key", admin)
        console.locator("#api-key").press("Enter")  # a change: the list is read again
        expect(console.locator("#notice")).to_have_text("")  # the list was read
    finally:
        context.close()


def test_the_page_works_with_its_own_token(
    page: Page, page_errors: PageErrors, keyed: tuple[KefuServer, str]
) -> None:
    server, admin = keyed
    assert httpx.post(server.url + "/chat", json={"message": "hi"}).status_code == 401
    page.goto(server.url + "/")
    send(page, QUESTION)
    expect(page.locator(".msg.assistant").first).to_contain_text(f"fake reply to: {QUESTION}")
    session_id = page.evaluate("localStorage.getItem('kefu-session')")
    token = page.evaluate("localStorage.getItem('kefu-token')")
    assert session_id
    assert token

    page.reload()  # the kept token still owns the conversation
    expect(page.locator(".msg.user")).to_have_text([QUESTION])
    send(page, "I want to talk to a human")
    page.wait_for_function(STREAM_SETTLED)
    reply = httpx.post(
        f"{server.url}/agent/sessions/{session_id}/reply",
        json={"message": "Hi, Mei here.", "agent": "mei"},
        headers={"x-api-key": admin},
    )
    assert reply.status_code == 201, reply.text
    expect(page.locator(".msg.agent")).to_contain_text("Hi, Mei here.")
    # Another visitor's page has a token of its own: the session is not theirs.
    page_html = httpx.get(server.url + "/").text
    other_token = page_html.split('<meta name="kefu-token" content="')[1].split('"')[0]
    other = httpx.get(
        f"{server.url}/sessions/{session_id}", headers={"authorization": f"Bearer {other_token}"}
    )
    assert other.status_code == 404
    assert page_errors.messages == []
