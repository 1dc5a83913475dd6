"""The fast path reads the knowledge base ahead of its customers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import SqliteOrders
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.entries import KbEntry
from kefu.service.fast_path import FastPath
from kefu.settings import Settings


@pytest.mark.anyio
async def test_the_demo_is_read_before_serving_and_an_import_when_asked(
    settings_factory: Callable[..., Settings],
) -> None:
    settings: Settings = settings_factory(fast_path=True)
    orders = SqliteOrders(settings.data_dir / "orders.db")
    await orders.open()
    hours = ServiceHours.parse(settings.service_hours)
    fast_path = FastPath(settings, embedder_factory=StaticEmbedder, orders=orders, hours=hours)
    await fast_path.open()
    try:

        def unread(kb: KnowledgeBase) -> list[str]:
            return kb.unread(9)

        assert await fast_path.read_kb(unread) == []  # the whole demo, in open()
        entry = KbEntry.make("Do you have a showroom?", "Yes: 12 Lumen Lane.")
        await fast_path.import_entries([entry])
        assert await fast_path.read_kb(unread) == [entry.question, entry.answer]
        assert await fast_path.read_ahead() == 2
        assert await fast_path.read_kb(unread) == []
        assert await fast_path.read_ahead() == 0
    finally:
        await fast_path.close()
