"""Browser fixtures: one ``kefu serve --engine fake`` subprocess, a shop's own site on
another origin that embeds the widget, one headless Chromium, and axe-core.

The browser is Debian's Chromium (``apt-get install chromium``) driven by Playwright's Python
package; Playwright's own browser downloads are never used. A Chromium that cannot start
fails the tests with the reason: they are never skipped. axe-core is the ``axe.min.js`` that
the ``axe-playwright-python`` wheel carries (a dev dependency), injected into the page.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Error,
    Frame,
    Page,
    Playwright,
    sync_playwright,
)

from tests.e2e.support import KefuServer, free_port, running_kefu

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


# A shop's own page. Its CSS is hostile on purpose: the widget must look the same anyway.
SHOP_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Lumen Home — sofas</title>
<style>
  * { font-family: serif !important; color: #333 !important; }
  button { display: none !important; }
  iframe { width: 1px !important; height: 1px !important; }
</style></head>
<body><main><h1>Sofas</h1><p>Three-seat sofas in linen and velvet, delivered in a week.</p></main>
<script src="{kefu}/widget.js" data-kefu-url="{kefu}" async></script>
</body></html>
"""


@dataclass
class ShopSite:
    """The shop's site: another origin (``localhost``, another port) than kefu's."""

    port: int
    kefu_url: str = ""

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"


@pytest.fixture(scope="package")
def shop_site() -> Iterator[ShopSite]:
    site = ShopSite(free_port())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = SHOP_PAGE.replace("{kefu}", site.kefu_url).encode()
            self.send_response(200 if self.path == "/" else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet test output

    httpd = ThreadingHTTPServer(("127.0.0.1", site.port), Handler)
    thread = threading.Thread(target=httpd.serve_forever, name="shop-site", daemon=True)
    thread.start()
    try:
        yield site
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory, shop_site: ShopSite) -> Iterator[KefuServer]:
    """``python -m kefu serve --engine fake --fake-token-delay 0.02`` on a free port; the
    shop's site may embed its widget."""
    base = tmp_path_factory.mktemp("kefu-browser")
    args = ["--engine", "fake", "--fake-token-delay", "0.02", "--allowed-origins", shop_site.url]
    with running_kefu(base, *args) as kefu:
        shop_site.kefu_url = kefu.url
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


AXE = resources.files("axe_playwright_python").joinpath("axe.min.js").read_text("utf-8")
RUN_AXE = """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
  .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" "))}))"""


def serious_violations(target: Page | Frame) -> list[str]:
    """axe-core's serious and critical violations on a page or frame, as readable lines."""
    target.add_script_tag(content=AXE)
    found: list[dict[str, object]] = target.evaluate(RUN_AXE)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {v['nodes']}"
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


def send(page: Page | Frame, message: str) -> None:
    page.fill("#text", message)
    page.get_by_role("button", name="Send").click()
