"""The demo shop lives in ``kefu/demo/`` alone: nothing else in ``src/`` holds its contents,
so every default is neutral and a shop's own settings are never mixed with the demo's."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

from kefu import demo
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.store import stored_sources
from kefu.settings import Settings
from tests.unit.fast_path_support import opened

SRC = Path(__file__).resolve().parents[2] / "src" / "kefu"
DEMO = SRC / "demo"
TEXT_FILES = {".py", ".md", ".html", ".js", ".css", ".json", ".toml", ".csv", ".txt", ".typed"}


def demo_strings() -> set[str]:
    """What only the demo has: its names, order numbers, items and hours, and what its
    knowledge base says (each sentence of its answers and its catalogue). Its questions
    are not among them: "Do you ship internationally?" is every shop's customers'."""
    found = {*demo.SHOP_NAME.split("|"), demo.ORDER_EXAMPLE, demo.SERVICE_HOURS}
    found |= {demo.ORDER_PATTERN, demo.ORDER_PATTERN.replace("\\", "\\\\")}
    for order in demo.sample_orders(date(2026, 1, 1)):
        found |= {order.id, *order.items}
    for entry in demo.entries():
        found |= {s for s in re.split(r"(?<=[.!?。！？])\s*", entry.answer) if len(s) >= 12}
    return {text.strip() for text in found if len(text.strip()) >= 4}


def test_no_file_outside_kefu_demo_holds_the_demo_s_contents() -> None:
    strings = demo_strings()
    assert len(strings) > 200  # the demo's questions and answers are among them
    leaks = []
    for path in sorted(SRC.rglob("*")):
        if DEMO in path.parents or not path.is_file() or path.suffix not in TEXT_FILES:
            continue
        text = path.read_text(encoding="utf-8")
        leaks += [f"{path.relative_to(SRC)}: {s!r}" for s in strings if s in text]
    assert not leaks, "the demo's contents outside kefu/demo/:\n" + "\n".join(leaks)


def test_the_demo_s_order_numbers_are_its_own() -> None:
    """Its example is among its sample orders, and its pattern takes every one of them."""
    ids = {order.id for order in demo.sample_orders(date(2026, 1, 1))}
    assert demo.ORDER_EXAMPLE in ids
    assert all(re.fullmatch(demo.ORDER_PATTERN, i) for i in ids)


@pytest.mark.anyio
async def test_a_shop_s_own_knowledge_base_sends_the_demo_away(
    settings_factory: Callable[..., Settings],
) -> None:
    """A fresh data dir answers as the demo; a shop that imports its own entries and
    restarts keeps only those (and the demo's name and numbers are gone with it)."""
    settings = settings_factory(fast_path=True)
    first = await opened(settings, second_look=False)
    try:
        assert {e.source for e in first.kb.entries()} == {demo.SOURCE}
        assert first.settings.shop_name == demo.SHOP_NAME
        own = KbEntry.make("Do you service e-bikes?", "Yes, every brand.", source="faq.csv")
        await first.change_kb(lambda kb: kb.add([own]))
        # An answer the model gave while the server was the demo, from its passages.
        demo_entry = first.kb.entries()[0]
        vector = first.embedder.embed_queries(["do you deliver on sundays"])[0]
        cached = await first.worker.remember(
            "scope", "do you deliver on sundays", "Yes, 2-4 days.", vector, [demo_entry.id]
        )
        assert cached is not None
    finally:
        await first.close()
    again = await opened(settings, second_look=False)
    try:
        assert [e.source for e in again.kb.entries()] == ["faq.csv"]
        assert again.cache.entries() == []  # nothing the demo's entries said is served
        assert again.settings.shop_name is None
        assert again.router.order_pattern is None
    finally:
        await again.close()


def test_the_start_reads_which_sources_a_knowledge_base_holds(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.db"
    assert stored_sources(path) == frozenset()  # no file yet: the demo's turn
    path.touch()
    assert stored_sources(path) == frozenset()  # a file without its table
    kb = KnowledgeBase.open(path, StaticEmbedder())
    kb.add([KbEntry.make("Do you fit tyres?", "Yes.", source="faq.csv")])
    kb.close()
    assert stored_sources(path) == {"faq.csv"}
