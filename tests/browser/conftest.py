"""Browser fixtures: one ``kefu serve --engine fake`` subprocess and one headless Chromium.

The browser is Debian's Chromium (``apt-get install chromium``) driven by Playwright's Python
package; Playwright's own browser downloads are never used. A Chromium that cannot start
fails the tests with the reason: they are never skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Error, Page, Playwright, sync_playwright

from tests.e2e.support import KefuServer, running_kefu

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
# Playwright's default of 30 s hides a stuck page behind a long wait; everything here is local.
TIMEOUT_MS = 10_000


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KefuServer]:
    """``python -m kefu serve --engine fake --fake-token-delay 0.02`` on a free port."""
    base = tmp_path_factory.mktemp("kefu-browser")
    with running_kefu(base, "--engine", "fake", "--fake-token-delay", "0.02") as kefu:
        yield kefu


@pytest.fixture(scope="package")
def base_url(server: KefuServer) -> str:
    return server.url


@pytest.fixture(scope="package")
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        yield client


# Package scope, not session: Playwright's sync API keeps an event loop running in
# this thread while it is open, and the async tests that run after this folder need it gone.
@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's Chromium "
            "(apt-get install -y chromium)",
            pytrace=False,
        )
    try:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
    except Error as exc:
        failure = str(exc)
    else:
        failure = ""
    if failure:  # failed outside the except block, so the reason is not buried in a traceback
        pytest.fail(f"Chromium at {CHROMIUM} did not launch: {failure}", pytrace=False)
    try:
        yield chromium
    finally:
        chromium.close()


@dataclass
class PageErrors:
    """Console messages of type error and uncaught exceptions of one page."""

    messages: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.messages.append(f"console: {message.text} at {message.location}")

    def page_error(self, error: Error) -> None:
        self.messages.append(f"pageerror: {error.message}")


@pytest.fixture
def page_errors() -> PageErrors:
    return PageErrors()


@pytest.fixture
def page(browser: Browser, page_errors: PageErrors) -> Iterator[Page]:
    """A fresh context (own localStorage) and page; errors collected into ``page_errors``."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    tab.on("console", page_errors.console)
    tab.on("pageerror", page_errors.page_error)
    try:
        yield tab
    finally:
        context.close()
