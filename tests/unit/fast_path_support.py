"""A FastPath opened on real parts (static embedder, e5, SQLite orders), for tests of its looks;
with the demo shop as the server would have it (``--demo``, or a fresh data dir)."""

from __future__ import annotations

from kefu import demo
from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import SqliteOrders
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.second_look import E5Transformer
from kefu.service.fast_path import FastPath
from kefu.settings import Settings


async def opened(settings: Settings, *, second_look: bool = True) -> FastPath:
    """Opened on the static embedder and SQLite orders; with e5's second look unless told not."""
    demo_in_use = demo.in_use(settings)
    if demo_in_use:
        settings = demo.applied(settings)
    sample = demo.sample_orders if demo_in_use else None
    orders = SqliteOrders(settings.data_dir / "orders.db", sample=sample)
    await orders.open()
    fast_path = FastPath(
        settings,
        embedder_factory=StaticEmbedder,
        orders=orders,
        hours=ServiceHours.parse(settings.service_hours),
        transformer_factory=E5Transformer if second_look else None,
        demo_in_use=demo_in_use,
    )
    await fast_path.open()
    return fast_path
