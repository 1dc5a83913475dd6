"""The chat page on the real model (llama.cpp, the bundled SmolLM2): an open question's
tokens arrive over several paints, and a connection cut mid-answer (a relay between the
browser and kefu drops it) leaves the page with the turn exactly once, then it goes on."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PageErrors, send
from tests.browser.relay import CuttableRelay
from tests.e2e.support import running_kefu

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

OPEN_QUESTION = "Tell me a short story about a lamp that travels the world."
CUT_QUESTION = "Describe in detail how a sofa is made, step by step."
# The text of the newest reply each time the browser paints a frame that changed it.
WATCH_PAINTS = """() => {
  window.paints = [];
  const look = () => {
    const replies = document.querySelectorAll(".msg.assistant");
    const last = replies[replies.length - 1];
    const text = last && !last.querySelector(".typing") ? last.firstChild?.textContent || "" : "";
    if (text && text !== window.paints[window.paints.length - 1]) window.paints.push(text);
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
}"""


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CuttableRelay]:
    """kefu on the bundled model, reached through a relay the test can cut."""
    base = tmp_path_factory.mktemp("kefu-live")
    with running_kefu(base, "--no-second-look", "--max-tokens", "40") as kefu:
        relay = CuttableRelay(kefu.port)
        try:
            yield relay
        finally:
            relay.close()


def test_an_open_answer_streams_over_paints_and_a_cut_connection_recovers(
    page: Page, page_errors: PageErrors, relay: CuttableRelay
) -> None:
    page.goto(relay.url + "/")
    page.evaluate(WATCH_PAINTS)
    send(page, OPEN_QUESTION)
    first = page.locator(".msg.assistant").first
    expect(first).to_have_attribute("data-tier", "llm", timeout=120_000)
    answer = first.evaluate("el => el.firstChild.textContent")
    paints: list[str] = page.evaluate("window.paints")
    assert len(paints) >= 5, paints  # token by token, not all at once
    assert all(answer.startswith(p) for p in paints), (paints, answer)  # grown, never redone
    assert paints[-1] == answer

    # Cut every connection while the second answer streams.
    send(page, CUT_QUESTION)
    reply = page.locator(".msg.assistant").nth(1)
    page.wait_for_function(
        "() => (document.querySelectorAll('.msg.assistant')[1]?.textContent || '').length > 20",
        timeout=120_000,
    )
    assert relay.cut() >= 1
    expect(page.locator("#status")).to_have_text("Connection lost — reconnecting…")
    # Recovered from the server's history: each turn once, the cut one marked as such.
    expect(reply.locator(".meta")).to_have_text("(interrupted)", timeout=20_000)
    expect(page.locator(".msg.user")).to_have_text([OPEN_QUESTION, CUT_QUESTION])
    expect(page.locator(".msg.assistant")).to_have_count(2)
    expect(page.locator("#status")).to_be_hidden()
    expect(page.locator("#text")).to_have_value("")  # it was taken: nothing to send again

    # And the conversation goes on.
    send(page, "Thank you!")
    expect(page.locator(".msg.assistant").nth(2)).to_have_attribute(
        "data-tier", re.compile(".+"), timeout=120_000
    )
    page.reload()
    expect(page.locator(".msg.user")).to_have_text([OPEN_QUESTION, CUT_QUESTION, "Thank you!"])
    errors = [m for m in page_errors.messages if "ERR_" not in m and "network" not in m.lower()]
    assert errors == []
