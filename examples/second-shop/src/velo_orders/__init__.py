"""Velo Works' orders for kefu: the shop's nightly order export, a JSON list, looked up by id.

Registered in ``pyproject.toml`` under ``kefu.order_backends`` as ``velo``; kefu calls
``open_orders`` when ``--order-backend velo`` is set. The export's path comes from the
shop's own variable ``VELO_ORDERS_FILE`` (default: ``velo_orders.json`` in kefu's data dir).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kefu.fastpath.order import Order, order_from
from kefu.fastpath.orders import OrderContext


class ExportedOrders:
    def __init__(self, path: Path) -> None:
        rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        # order_from checks each row as kefu checks its own backends' (a bad export fails at start).
        self._orders = {row["id"].upper(): order_from(row, row["id"]) for row in rows}

    async def lookup(self, order_id: str) -> Order | None:
        return self._orders.get(order_id.upper())

    async def close(self) -> None:
        """Nothing held open: the export is read once, at the start."""


def open_orders(context: OrderContext) -> ExportedOrders:
    default = context.data_dir / "velo_orders.json"
    return ExportedOrders(Path(os.environ.get("VELO_ORDERS_FILE", default)))
