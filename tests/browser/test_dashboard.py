"""``/dashboard`` in a real browser: live figures, empty data, gaps, a server out of reach."""

from __future__ import annotations

import json
import time
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from kefu.observe.records import RequestRecord
from kefu.observe.window import WindowEntry, summarize
from tests.browser.conftest import PageErrors

pytestmark = pytest.mark.browser

PIPELINE = [
    "parse",
    "session",
    "context",
    "admission",
    "queue",
    "prefill",
    "decode",
    "finish",
    "send",
]
NO_VALUE = "—"


def page_ms(value: float | None) -> str:
    """The page's fmtMs, number and unit: JS rounds halves up, on the float's exact value."""
    if value is None:
        return NO_VALUE
    if value < 1000:
        step = "0.1" if value < 100 else "1"
        return f"{Decimal(value).quantize(Decimal(step), rounding=ROUND_HALF_UP)} ms"
    seconds = value / 1000  # one IEEE division, as in the page
    step = "0.01" if seconds < 10 else "0.1"
    return f"{Decimal(seconds).quantize(Decimal(step), rounding=ROUND_HALF_UP)} s"


def tile(page: Page, key: str) -> str:
    """A latency tile's figure as read: number and unit, e.g. ``20.7 ms``."""
    number = page.locator(f"#{key}").inner_text()
    unit = page.locator(f"#{key}-unit").inner_text()
    return f"{number} {unit}".strip()


def make_traffic(http: httpx.Client) -> None:
    session_id = None
    for message in ("Where is my parcel?", "And the refund?", "Thanks!"):
        body: dict[str, Any] = {"message": message}
        if session_id:
            body["session_id"] = session_id
        with http.stream("POST", "/chat", json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: ") and session_id is None:
                    session_id = json.loads(line[6:])["session_id"]
    for stream in (False, True):
        response = http.post(
            "/v1/chat/completions",
            json={
                "model": "kefu",
                "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        assert response.status_code == 200


def legend_names(page: Page, selector: str) -> list[str]:
    return [text.split(" ")[0] for text in page.locator(f"{selector} span").all_inner_texts()]


def test_dashboard_shows_live_figures(
    page: Page, page_errors: PageErrors, base_url: str, http: httpx.Client
) -> None:
    make_traffic(http)
    page.goto(base_url + "/dashboard")
    expect(page.locator("#ttft-p50")).not_to_have_text(NO_VALUE)
    expect(page.locator("#idle")).to_be_hidden()

    stats = http.get("/stats", params={"window": 300}).json()
    assert stats["requests"] >= 5
    assert tile(page, "ttft-p50") == page_ms(stats["ttft_ms"]["p50"])
    assert tile(page, "e2e-p99") == page_ms(stats["e2e_ms"]["p99"])
    for figure in ("#rps", "#tps", "#errors", "#waiting"):
        expect(page.locator(figure)).not_to_have_text(NO_VALUE)
    expect(page.locator("#errors")).to_have_text("0")

    assert "decode" in legend_names(page, "#stages-legend")
    expect(page.locator("#stages")).to_contain_text("decode")
    expect(page.locator("#tiers")).to_contain_text("llm")
    expect(page.locator("#c-tiers .legend")).to_contain_text("llm")
    expect(page.locator("#health")).to_have_text("healthy")
    expect(page.locator("#findings")).to_contain_text("ttft")
    # Lines were drawn in the latency charts, and nothing says the server is gone.
    assert page.locator("#c-ttft svg path").count() >= 1
    expect(page.locator("#down")).to_be_hidden()
    assert page_errors.messages == []


def test_dashboard_waits_for_traffic_then_draws_gaps(
    page: Page, page_errors: PageErrors, base_url: str
) -> None:
    """Stub /stats with summaries built by kefu's own summarize(): first empty, then sparse."""
    now = time.time()
    start, bucket = now - 300, 5.0
    idle = summarize([], [], start=start, end=now, bucket=bucket)
    # Three answers far apart: most buckets have null percentiles; stage keys out of order
    # and one stage the page does not know ("retry"), which goes last.
    stages = dict.fromkeys(reversed(PIPELINE), 1.0) | {"retry": 3.0, "decode": 40.0}
    entries = [
        WindowEntry.of(
            RequestRecord(
                at=start + offset,
                request_id=f"r{offset}",
                method="POST",
                route="/chat",
                status=200,
                e2e_ms=sum(stages.values()),
                tier=tier,
                ttft_ms=ttft,
                completion_tokens=10,
                stages_ms=stages,
            ),
            {},
        )
        for offset, ttft, tier in ((30, 150.25, "llm"), (120, 99.95, "faq"), (125, 2345.678, "llm"))
    ]
    sparse = summarize(entries, [], start=start, end=now, bucket=bucket)
    assert any(row["ttft_ms"]["p50"] is None for row in sparse["series"])
    served = {"body": idle}

    def fulfil(route: Route) -> None:
        route.fulfill(json=served["body"])

    page.route("**/stats?*", fulfil)
    page.goto(base_url + "/dashboard")
    expect(page.locator("#idle")).to_be_visible()
    expect(page.locator("#idle")).to_contain_text("waiting for traffic")
    expect(page.locator("#c-ttft")).to_contain_text("waiting for traffic")
    expect(page.locator("#stages")).to_contain_text("waiting for traffic")
    expect(page.locator("#ttft-p50")).to_have_text(NO_VALUE)
    expect(page.locator("#rps")).to_have_text(NO_VALUE)

    served["body"] = sparse
    expect(page.locator("#ttft-p50")).not_to_have_text(NO_VALUE)
    assert tile(page, "ttft-p50") == page_ms(sparse["ttft_ms"]["p50"]) == "150 ms"
    assert tile(page, "ttft-p99") == page_ms(sparse["ttft_ms"]["p99"]) == "2.35 s"
    assert tile(page, "e2e-p50") == page_ms(sparse["e2e_ms"]["p50"]) == "51.0 ms"
    expect(page.locator("#idle")).to_be_hidden()
    assert legend_names(page, "#stages-legend") == [*PIPELINE, "retry"]
    expect(page.locator("#tiers")).to_contain_text("llm")
    expect(page.locator("#c-tiers .legend")).to_contain_text("faq 1")
    # Lone points between null buckets are drawn as dots, not lost.
    assert page.locator("#c-ttft svg circle").count() >= 1
    expect(page.locator("#c-errors")).to_contain_text("no errors")
    assert page_errors.messages == []


def test_dashboard_says_when_stats_cannot_be_reached(page: Page, base_url: str) -> None:
    page.route("**/stats?*", lambda route: route.abort())
    page.goto(base_url + "/dashboard")
    banner = page.locator("#down")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("cannot reach /stats")

    page.unroute("**/stats?*")  # the server is back: the next poll clears the banner
    expect(banner).to_be_hidden()
    expect(page.locator("#updated")).to_contain_text("updated")
