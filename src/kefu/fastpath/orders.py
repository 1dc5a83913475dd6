"""The order_status tool: look an order up in a pluggable backend, answer from a template.

A backend answers ``None`` for an order that does not exist and raises
``kefu.errors.ToolUnavailable`` when it cannot answer at all — the two must not be
confused, or a customer is told that a real order does not exist.

Backends are registered under the ``kefu.order_backends`` entry points
(``kefu.plugins``) as a function ``(OrderContext) -> OrderBackend``, awaited when it
returns an awaitable; ``--order-backend`` names one. kefu's own: ``sqlite`` (a table in
the data dir, seeded with the demo's sample orders when the demo is in use) and
``http`` (the shop's own order API).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx

from kefu import plugins
from kefu.errors import ToolUnavailable
from kefu.fastpath.order import STATUSES, Order, Status, order_from
from kefu.fastpath.order_replies import order_reply, order_unavailable_reply
from kefu.sqlite_files import open_wal

__all__ = [
    "STATUSES",
    "HttpOrders",
    "Order",
    "OrderBackend",
    "OrderContext",
    "SqliteOrders",
    "Status",
    "order_reply",
    "order_unavailable_reply",
]

T = TypeVar("T")
RETRY_AFTER = 5.0


SampleOrders = Callable[[date], Sequence[Order]]


@dataclass(frozen=True, slots=True)
class OrderContext:
    """What kefu hands a backend's factory: a backend of its own reads its own settings
    (its environment variables, its files) beside these."""

    data_dir: Path
    api_url: str | None = None  # --order-api-url
    sample_orders: SampleOrders | None = None  # the demo's, when the demo is in use


class OrderBackend(Protocol):
    async def lookup(self, order_id: str) -> Order | None:
        """The order, or None when there is no such order; ToolUnavailable when it cannot tell."""
        ...

    async def close(self) -> None: ...


SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    carrier TEXT,
    tracking TEXT,
    eta TEXT,
    items TEXT NOT NULL DEFAULT '[]',
    updated_at TEXT NOT NULL
);
"""


async def open_backend(name: str, context: OrderContext) -> OrderBackend:
    """The backend ``--order-backend`` names, opened; ``plugins.UnknownPart`` when no
    installed package registers it."""
    factory = plugins.load(plugins.ORDER_BACKENDS, name)
    if not callable(factory):
        raise TypeError(f"order backend '{name}' is registered as {factory!r}, not a function")
    backend = factory(context)
    if inspect.isawaitable(backend):
        backend = await backend
    return backend  # type: ignore[no-any-return]


async def open_sqlite(context: OrderContext) -> SqliteOrders:
    """``--order-backend sqlite``."""
    orders = SqliteOrders(context.data_dir / "orders.db", sample=context.sample_orders)
    await orders.open()
    return orders


def open_http(context: OrderContext) -> HttpOrders:
    """``--order-backend http``."""
    if context.api_url is None:
        raise ValueError("order backend 'http' needs --order-api-url (KEFU_ORDER_API_URL)")
    return HttpOrders(context.api_url)


class SqliteOrders:
    """Orders in ``data_dir/orders.db``; ``sample`` orders (the demo's, when it is in
    use) are written when the file is new, so its order example finds an order; a shop's
    own table starts empty.

    ``PRAGMA user_version`` records that the file was set up, so an operator who empties
    or edits the table does not get the sample data back at the next start.
    """

    def __init__(
        self, path: Path, *, today: date | None = None, sample: SampleOrders | None = None
    ) -> None:
        self.path = path
        self._today = today
        self._sample = sample
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kefu-orders")
        self._conn: sqlite3.Connection | None = None

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise RuntimeError("order store is not open")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, conn)
        except sqlite3.Error as exc:
            raise ToolUnavailable(f"order store failed: {exc}", retry_after=RETRY_AFTER) from exc

    async def open(self) -> None:
        today = self._today or date.today()

        def connect() -> sqlite3.Connection:
            conn = open_wal(self.path)
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(SCHEMA)
                (version,) = conn.execute("PRAGMA user_version").fetchone()
                if version == 0 and self._sample is not None:
                    conn.executemany(
                        "INSERT OR IGNORE INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [_row(order) for order in self._sample(today)],
                    )
                if version == 0:
                    conn.execute("PRAGMA user_version = 1")
            return conn

        self._conn = await asyncio.get_running_loop().run_in_executor(self._executor, connect)

    async def lookup(self, order_id: str) -> Order | None:
        def select(conn: sqlite3.Connection) -> Order | None:
            row = conn.execute(
                "SELECT id, status, carrier, tracking, eta, items, updated_at FROM orders "
                "WHERE id = ? COLLATE NOCASE",
                (order_id,),
            ).fetchone()
            return None if row is None else _order(row)

        return await self._run(select)

    async def close(self) -> None:
        if self._conn is not None:
            await self._run(lambda conn: conn.close())
            self._conn = None
        self._executor.shutdown(wait=True)


def _row(order: Order) -> tuple[str | None, ...]:
    return (
        order.id,
        order.status,
        order.carrier,
        order.tracking,
        order.eta,
        json.dumps(list(order.items), ensure_ascii=False),
        order.updated_at,
    )


def _order(row: tuple[Any, ...]) -> Order:
    order_id, status, carrier, tracking, eta, items, updated_at = row
    return order_from(
        {
            "id": order_id,
            "status": status,
            "carrier": carrier,
            "tracking": tracking,
            "eta": eta,
            "items": json.loads(items),
            "updated_at": updated_at,
        },
        order_id,
    )


class HttpOrders:
    """The shop's own order API: ``GET url_template`` with the id URL-quoted into ``{order_id}``.

    200 with a JSON object ``{id, status, carrier?, tracking?, eta?, items?, updated_at?}``
    is the order; 404 is no such order; anything else (another status, a timeout,
    a body that is not such an object) means the API cannot answer: ToolUnavailable.
    """

    def __init__(
        self, url_template: str, *, timeout: float = 2.0, client: httpx.AsyncClient | None = None
    ) -> None:
        if "{order_id}" not in url_template:
            raise ValueError("the order API URL template must contain {order_id}")
        self.url_template = url_template
        self.timeout = timeout
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)

    def url(self, order_id: str) -> str:
        return self.url_template.replace("{order_id}", quote(order_id, safe=""))

    async def lookup(self, order_id: str) -> Order | None:
        url = self.url(order_id)
        try:
            response = await self._client.get(
                url, timeout=self.timeout, headers={"Accept": "application/json"}
            )
        except httpx.TimeoutException as exc:
            raise ToolUnavailable(
                f"order API timed out after {self.timeout:g} s", retry_after=RETRY_AFTER
            ) from exc
        except httpx.HTTPError as exc:
            raise ToolUnavailable(f"order API unreachable: {exc}", retry_after=RETRY_AFTER) from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise ToolUnavailable(
                f"order API answered HTTP {response.status_code}", retry_after=RETRY_AFTER
            )
        try:
            body = response.json()
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
            return order_from(body, order_id)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise ToolUnavailable(
                f"order API sent an invalid order: {exc}", retry_after=RETRY_AFTER
            ) from exc

    async def close(self) -> None:
        if self._owns_client:
            await self._client.aclose()
