"""The demo shop, Lumen Home: what ``kefu serve`` answers with before a shop sets up its own.

A fictional home-goods shop in English and Chinese: its knowledge base (``kb/``), its
sample orders (``orders.py``), the FAQ decision fitted to its labels
(``faq_model.json``, ``scripts/calibrate-demo``) and its questions' vectors for the
second look (``e5.npz``, ``scripts/embed-demo``), so a first start answers at once.

It is in use with ``--demo``, or, unless ``--no-demo``, while the knowledge base holds
nothing but the demo's entries; then the shop settings a deployment did not set take
the demo's values (its name, order numbers, hours). Nothing outside this package
knows the demo's contents: every setting's own default is neutral.
"""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path

from kefu.demo.orders import sample_orders
from kefu.knowledge.base import KB_FILE
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.importers import parse_bytes
from kefu.knowledge.store import stored_sources
from kefu.settings import Settings

__all__ = [
    "FAQ_MODEL",
    "ORDER_EXAMPLE",
    "ORDER_PATTERN",
    "SERVICE_HOURS",
    "SHOP",
    "SHOP_NAME",
    "SOURCE",
    "VECTORS",
    "applied",
    "entries",
    "in_use",
    "sample_orders",
]

SOURCE = "demo"  # the source its entries are stored under
FAQ_MODEL = Path(__file__).parent / "faq_model.json"
VECTORS = Path(__file__).parent / "e5.npz"
SHOP_NAME = "Lumen Home|流明家居"
ORDER_PATTERN = r"\bLH-?\d{6}\b"
ORDER_EXAMPLE = "LH-100234"  # sample_orders has it, so trying the example finds an order
SERVICE_HOURS = "Mon-Sat 09:00-18:00 +08:00"
# The shop settings the demo fills in where a deployment left them unset.
SHOP = {
    "shop_name": SHOP_NAME,
    "order_pattern": ORDER_PATTERN,
    "order_example": ORDER_EXAMPLE,
    "service_hours": SERVICE_HOURS,
}


def entries() -> list[KbEntry]:
    """The demo's FAQ and its catalogue (a passage of what the shop sells), English and
    Chinese, marked with source "demo"."""
    found: list[KbEntry] = []
    for item in sorted(resources.files(__package__).joinpath("kb").iterdir(), key=str):
        if item.name.endswith((".csv", ".md")):
            parsed = parse_bytes(item.read_bytes(), item.name)
            found.extend(dataclasses.replace(entry, source=SOURCE) for entry in parsed)
    return found


def in_use(settings: Settings) -> bool:
    """``--demo``/``--no-demo`` when given; else whether the data dir's knowledge base
    holds nothing but the demo (or nothing yet). Needs the fast path, which holds it."""
    if not settings.fast_path:
        return False
    if settings.demo is not None:
        return settings.demo
    return stored_sources(settings.data_dir / KB_FILE) <= {SOURCE}


def applied(settings: Settings) -> Settings:
    """The settings with the demo's shop values wherever the deployment set none."""
    unset = {name: value for name, value in SHOP.items() if name not in settings.model_fields_set}
    return settings.model_copy(update=unset)
