"""A second shop set up from nothing, as examples/second-shop/README.md says: its order
backend pip-installed from a package of its own (found by its entry point), its FAQ
imported, its own name, order numbers and hours; nothing of the demo shop appears."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kefu import demo
from tests.e2e.support import KefuServer, chat_stream

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "second-shop"
SHOP = (
    *("--order-backend", "velo", "--shop-name", "Velo Works|维洛单车"),
    *("--order-pattern", r"\bVW-\d{4}-\d{5}\b", "--order-example", "VW-2026-00417"),
    *("--service-hours", "Mon-Fri 08:00-17:00 +01:00"),
)


@pytest.fixture(scope="module")
def velo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    base = tmp_path_factory.mktemp("velo")
    site = base / "site"
    # A real install of the shop's package (its own pyproject.toml, its entry point) into a
    # directory of its own, so the other tests' kefu never sees the "velo" backend.
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site)]
    source = shutil.copytree(EXAMPLE, base / "second-shop")  # pip builds in the tree
    subprocess.run([*pip, str(source)], check=True, capture_output=True, timeout=300)
    env = {"PYTHONPATH": str(site), "VELO_ORDERS_FILE": str(EXAMPLE / "orders.json")}
    data = base / "data"
    imported = subprocess.run(
        [
            sys.executable,
            "-m",
            "kefu",
            "kb",
            "import",
            str(EXAMPLE / "faq.csv"),
            "--data-dir",
            str(data),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    assert imported.returncode == 0, imported.stderr
    server = KefuServer(data, base / "kefu.log", SHOP, env=env)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=120.0) as client:
            yield client
    finally:
        server.stop()


def reply(http: httpx.Client, message: str) -> dict[str, object]:
    done: dict[str, object] = chat_stream(http, message)[-1].json()
    return done


def test_its_faq_is_the_knowledge_base_and_the_demo_stays_out(velo: httpx.Client) -> None:
    listed = velo.get("/kb").json()
    assert listed["count"] == 8
    assert {entry["source"] for entry in listed["entries"]} == {"faq.csv"}
    done = reply(velo, "How do I choose my frame size?")
    assert done["tier"] == "faq", done
    assert "inside leg" in str(done["reply"])


def test_its_order_backend_answers_for_its_order_numbers(velo: httpx.Client) -> None:
    done = reply(velo, "where is my order VW-2026-00417?")
    assert done["tier"] == "tool", done
    assert "PN55120417" in str(done["reply"])
    assert "VW-2026-00418" in str(reply(velo, "订单VW-2026-00418到哪了")["reply"])
    # The demo's order numbers are nothing here: the tool asks for one of the shop's.
    asked = str(reply(velo, f"where is my order {demo.ORDER_EXAMPLE}?")["reply"])
    assert "VW-2026-00417" in asked
    assert demo.ORDER_EXAMPLE not in asked


def test_its_replies_name_it_and_nothing_of_the_demo(velo: httpx.Client) -> None:
    english = str(reply(velo, "hi, who are you?")["reply"])
    assert "Velo Works" in english
    assert "VW-2026-00417" in english
    assert "维洛单车" in str(reply(velo, "你好")["reply"])
    page = velo.get("/").text + velo.get("/widget/config").text
    demo_names = demo.SHOP_NAME.split("|")
    for text in (english, page):
        assert not any(name in text for name in demo_names)
