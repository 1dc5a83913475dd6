"""``/docs`` in a real browser: it renders every operation of /openapi.json, offline."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from tests.browser.conftest import PageErrors

pytestmark = pytest.mark.browser


def test_the_api_page_renders_every_operation_offline(
    page: Page, page_errors: PageErrors, base_url: str, http: httpx.Client
) -> None:
    outside: list[str] = []

    def only_local(route: Route) -> None:
        if route.request.url.startswith(base_url):
            route.continue_()
        else:  # a CDN would be a request elsewhere: refuse it and remember it
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.goto(base_url + "/docs")
    document = http.get("/openapi.json").json()
    operations = sum(len(item) for item in document["paths"].values())
    expect(page.locator("details.op")).to_have_count(operations)
    expect(page.locator("#about")).to_contain_text("OpenAPI 3.1.0")
    path = page.locator(".path", has_text=re.compile(r"^/chat$"))
    chat = page.locator("details.op", has=path)
    expect(chat).to_have_count(1)
    chat.locator("summary").click()
    # The SSE events and their models are shown, read from the document.
    expect(chat).to_contain_text(re.compile(r"event: done\s+data: DoneEvent"))
    expect(chat).to_contain_text("ErrorEnvelope")
    assert outside == []
    assert page_errors.messages == []
