"""The chat page shows /chat's 503 ``busy`` answer (issue 23): the polite message, with
what it suggests, instead of an error."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PageErrors, send
from tests.e2e.support import running_kefu

pytestmark = pytest.mark.browser


def test_a_busy_answer_is_shown_not_an_error(
    page: Page, page_errors: PageErrors, tmp_path: Path
) -> None:
    # One slot, no line: while one long reply streams, the next message is refused.
    flags = ["--engine", "fake", "--fake-token-delay", "0.05", "--fake-reply-words", "400"]
    flags += ["--parallel", "1", "--max-queue", "0", "--no-fast-path"]
    with running_kefu(tmp_path, *flags) as kefu, httpx.Client(base_url=kefu.url) as http:
        started, done = threading.Event(), threading.Event()

        def hold_the_slot() -> None:
            body = {"message": "a long story please"}
            with http.stream("POST", "/chat", json=body, timeout=60) as response:
                for _ in response.iter_lines():
                    started.set()
                    if done.is_set():
                        return  # leaves mid-reply: the slot frees

        holder = threading.Thread(target=hold_the_slot, daemon=True)
        holder.start()
        assert started.wait(10)

        page.goto(kefu.url + "/")
        send(page, "Where is my order?")
        reply = page.locator(".msg.notice").first
        expect(reply).to_contain_text("We're busy right now")
        expect(reply).to_contain_text("human agent")
        expect(page.locator(".msg.error")).to_have_count(0)
        # The refused message began no conversation.
        assert page.evaluate("localStorage.getItem('kefu-session')") is None
        done.set()
        holder.join(timeout=30)
    # The browser logs the 503 itself; nothing else may go wrong on the page.
    assert [m for m in page_errors.messages if "503" not in m] == []
