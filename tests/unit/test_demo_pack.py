"""The demo shop lives in ``kefu/demo/`` alone: nothing else in ``src/`` holds its contents,
so every default is neutral and a shop's own settings are never mixed with the demo's."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from kefu import demo

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
