"""A FastPath opened on real parts (static embedder, e5, SQLite orders), for tests of its looks."""

from __future__ import annotations

from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import SqliteOrders
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.second_look import E5Transformer
from kefu.service.fast_path import FastPath
from kefu.settings import Settings


async def opened(settings: Settings, *, second_look: bool = True) -> FastPath:
    """Opened on the static embedder and SQLite orders; with e5's second look unless told not."""
    orders = SqliteOrders(settings.data_dir / "orders.db")
    await orders.open()
    fast_path = FastPath(
        settings,
        embedder_factory=StaticEmbedder,
        orders=orders,
        hours=ServiceHours.parse(settings.service_hours),
        transformer_factory=E5Transformer if second_look else None,
    )
    await fast_path.open()
    return fast_path
