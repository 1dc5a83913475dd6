"""Order backends (SQLite demo table, shop HTTP API) and the templated replies."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path

import httpx
import pytest

from kefu import demo
from kefu.errors import ToolUnavailable
from kefu.fastpath.orders import (
    STATUSES,
    HttpOrders,
    Order,
    OrderBackend,
    SqliteOrders,
    order_reply,
    order_unavailable_reply,
)

pytestmark = pytest.mark.anyio
TODAY = date(2025, 6, 2)


@pytest.fixture
async def orders(tmp_path: Path) -> AsyncIterator[SqliteOrders]:
    store = SqliteOrders(tmp_path / "orders.db", today=TODAY, sample=demo.sample_orders)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def test_backends_are_order_backends(tmp_path: Path) -> None:
    backends: list[OrderBackend] = [
        SqliteOrders(tmp_path / "o.db"),
        HttpOrders("https://shop.example/api/orders/{order_id}"),
    ]
    assert len(backends) == 2


async def test_demo_orders_cover_every_status(orders: SqliteOrders) -> None:
    found = [await orders.lookup(f"LH-{100000 + n}") for n in range(1, 31)]
    assert all(order is not None for order in found)
    assert {order.status for order in found if order is not None} == set(STATUSES)
    example = await orders.lookup("LH-100234")
    assert example is not None
    assert example.status == "shipped"
    assert example.eta == "2025-06-04"


async def test_lookup(orders: SqliteOrders) -> None:
    shipped = await orders.lookup("LH-100002")
    assert shipped is not None
    assert shipped.id == "LH-100002"
    assert shipped.carrier
    assert shipped.tracking
    assert shipped.items
    assert shipped.eta == "2025-06-04"
    processing = await orders.lookup("lh-100001")  # case does not matter
    assert processing is not None
    assert (processing.status, processing.carrier, processing.tracking) == (
        "processing",
        None,
        None,
    )
    assert await orders.lookup("LH-999999") is None


async def test_demo_data_is_written_once(tmp_path: Path) -> None:
    path = tmp_path / "orders.db"
    first = SqliteOrders(path, today=TODAY, sample=demo.sample_orders)
    await first.open()
    await first.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM orders WHERE id = 'LH-100001'")
        conn.execute(
            "INSERT INTO orders VALUES ('LH-200000', 'delivered', NULL, NULL, NULL, "
            "'[\"Sofa\"]', '2025-06-01T10:00')"
        )
    again = SqliteOrders(path, today=date(2030, 1, 1), sample=demo.sample_orders)
    await again.open()
    try:
        assert await again.lookup("LH-100001") is None  # the operator's deletion stands
        mine = await again.lookup("LH-200000")
        assert mine is not None
        assert mine.items == ("Sofa",)
        later = await again.lookup("LH-100002")
        assert later is not None
        assert later.eta == "2025-06-04"  # not rewritten with the new date
    finally:
        await again.close()


async def test_not_open(tmp_path: Path) -> None:
    store = SqliteOrders(tmp_path / "o.db")
    with pytest.raises(RuntimeError, match="not open"):
        await store.lookup("LH-100001")


async def test_broken_table_is_unavailable(orders: SqliteOrders, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "orders.db") as conn:
        conn.execute("DROP TABLE orders")
    with pytest.raises(ToolUnavailable, match="order store failed"):
        await orders.lookup("LH-100001")


# --- HTTP ---------------------------------------------------------------------------

TEMPLATE = "https://shop.example/api/orders/{order_id}"
SHIPPED = {
    "id": "LH-100234",
    "status": "shipped",
    "carrier": "Ninja Van",
    "tracking": "NV123",
    "eta": "2025-06-04",
    "items": ["Oak dining table"],
}


def http_orders(handler: httpx.MockTransport) -> HttpOrders:
    return HttpOrders(TEMPLATE, timeout=0.5, client=httpx.AsyncClient(transport=handler))


async def test_http_200() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=SHIPPED)

    backend = http_orders(httpx.MockTransport(handler))
    order = await backend.lookup("LH-100234")
    assert order == Order(
        "LH-100234", "shipped", "Ninja Van", "NV123", "2025-06-04", ("Oak dining table",), ""
    )
    assert str(seen[0].url) == "https://shop.example/api/orders/LH-100234"
    await backend.close()


async def test_http_minimal_body_and_quoting() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.raw_path == b"/api/orders/A%2FB%20C"
        return httpx.Response(200, json={"status": "processing"})

    backend = http_orders(httpx.MockTransport(handler))
    order = await backend.lookup("A/B C")
    assert order == Order("A/B C", "processing", None, None, None, (), "")


async def test_http_404_is_no_such_order() -> None:
    backend = http_orders(httpx.MockTransport(lambda r: httpx.Response(404)))
    assert await backend.lookup("LH-100999") is None


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(500), "HTTP 500"),
        (httpx.Response(401), "HTTP 401"),
        (httpx.Response(200, content=b"<html>oops</html>"), "invalid order"),
        (httpx.Response(200, json=["LH-100234"]), "not a JSON object"),
        (httpx.Response(200, json={"status": "lost_at_sea"}), "status 'lost_at_sea'"),
        (httpx.Response(200, json={"status": "shipped", "items": "sofa"}), "items must be"),
        (httpx.Response(200, json={"status": "shipped", "eta": 20250604}), "eta must be"),
    ],
)
async def test_http_failures_are_unavailable(response: httpx.Response, message: str) -> None:
    backend = http_orders(httpx.MockTransport(lambda r: response))
    with pytest.raises(ToolUnavailable, match=message):
        await backend.lookup("LH-100234")


async def test_http_timeout_and_connect_error() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(ToolUnavailable, match=r"timed out after 0\.5 s"):
        await http_orders(httpx.MockTransport(timeout)).lookup("LH-100234")
    with pytest.raises(ToolUnavailable, match="unreachable"):
        await http_orders(httpx.MockTransport(refused)).lookup("LH-100234")


async def test_http_owns_its_client_only_when_it_made_it() -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(404)))
    backend = HttpOrders(TEMPLATE, client=client)
    await backend.close()
    assert not client.is_closed
    await client.aclose()
    own = HttpOrders(TEMPLATE)
    await own.close()
    assert own._client.is_closed


def test_http_template_needs_the_placeholder() -> None:
    with pytest.raises(ValueError, match="order_id"):
        HttpOrders("https://shop.example/api/orders")


# --- replies ------------------------------------------------------------------------


def make(status: str, **fields: object) -> Order:
    base: dict[str, object] = {
        "id": "LH-100234",
        "status": status,
        "carrier": "Ninja Van",
        "tracking": "NV123",
        "eta": "2025-06-04",
        "items": ("Oak dining table", "Linen sofa cover"),
        "updated_at": "2025-06-02T10:00+08:00",
    }
    base.update(fields)
    return Order(**base)  # type: ignore[arg-type]


EN = {
    "processing": "Order LH-100234 is being prepared in our warehouse and has not shipped yet. "
    "Carrier: Ninja Van, tracking number NV123. Estimated delivery: 2025-06-04. "
    "Items: Oak dining table, Linen sofa cover.",
    "shipped": "Order LH-100234 has shipped. Carrier: Ninja Van, tracking number NV123. "
    "Estimated delivery: 2025-06-04. Items: Oak dining table, Linen sofa cover.",
    "out_for_delivery": "Order LH-100234 is out for delivery today. Carrier: Ninja Van, "
    "tracking number NV123. Items: Oak dining table, Linen sofa cover.",
    "delivered": "Order LH-100234 has been delivered. Carrier: Ninja Van, tracking number "
    "NV123. Delivered on 2025-06-04. Items: Oak dining table, Linen sofa cover.",
    "cancelled": "Order LH-100234 was cancelled. Items: Oak dining table, Linen sofa cover.",
    "returned": "Order LH-100234 was returned to us. Carrier: Ninja Van, tracking number NV123. "
    "Items: Oak dining table, Linen sofa cover.",
}
ZH = {
    "processing": "订单 LH-100234 正在仓库备货中，尚未发货。承运商：Ninja Van，运单号 NV123。"
    "预计送达：2025-06-04。",
    "shipped": "订单 LH-100234 已发货。承运商：Ninja Van，运单号 NV123。预计送达：2025-06-04。",
    "out_for_delivery": "订单 LH-100234 今天正在派送中。承运商：Ninja Van，运单号 NV123。",
    "delivered": "订单 LH-100234 已签收。承运商：Ninja Van，运单号 NV123。签收日期：2025-06-04。",
    "cancelled": "订单 LH-100234 已取消。",
    "returned": "订单 LH-100234 已退回。承运商：Ninja Van，运单号 NV123。",
}


@pytest.mark.parametrize("status", STATUSES)
def test_reply_for_each_status(status: str) -> None:
    order = make(status)
    assert order_reply(order, order.id, "en") == EN[status]
    assert (
        order_reply(order, order.id, "zh")
        == ZH[status] + "商品：Oak dining table、Linen sofa cover。"
    )


def test_reply_leaves_out_what_is_unknown() -> None:
    only_tracking = make("shipped", carrier=None, eta=None, items=())
    assert order_reply(only_tracking, None, "en") == (
        "Order LH-100234 has shipped. Tracking number: NV123."
    )
    order = make("shipped", carrier=None, tracking=None, eta=None, items=())
    assert order_reply(order, order.id, "en") == "Order LH-100234 has shipped."
    assert order_reply(order, order.id, "zh") == "订单 LH-100234 已发货。"


def test_reply_unknown_order() -> None:
    assert order_reply(None, "LH-123456", "en", example="LH-100234") == (
        "I couldn't find order LH-123456. Please check the number (it looks like LH-100234, "
        "in your confirmation email) or ask for a human agent."
    )
    zh = order_reply(None, "LH-123456", "zh")
    assert "没有找到订单 LH-123456" in zh
    assert "转人工" in zh
    # Without an example to show, no shape is claimed.
    assert "looks like" not in order_reply(None, "LH-123456", "en")


def test_reply_asks_for_the_number() -> None:
    en = order_reply(None, None, "en")
    assert "order number" in en
    assert "looks like" not in en
    assert "订单号" in order_reply(None, None, "zh")
    assert "AB12345" in order_reply(None, None, "en", example="AB12345")


def test_reply_to_a_mistyped_number() -> None:
    en = order_reply(None, None, "en", mistyped="LH-10023", example="LH-100234")
    assert en.startswith("LH-10023 doesn't look like one of our order numbers")
    assert "LH-100234" in en
    zh = order_reply(None, None, "zh", mistyped="LH-10023", example="LH-555555")
    assert zh.startswith("LH-10023 不是有效的订单号")
    assert "LH-555555" in zh


def test_unavailable_reply() -> None:
    assert "LH-100234" in order_unavailable_reply("LH-100234", "en")
    assert "right now" in order_unavailable_reply(None, "en")
    assert "暂时无法查询" in order_unavailable_reply("LH-100234", "zh")


async def test_without_the_demo_the_order_table_starts_empty(tmp_path: Path) -> None:
    """The sample orders go with the demo, not with every shop."""
    store = SqliteOrders(tmp_path / "o.db", today=TODAY)
    await store.open()
    try:
        assert await store.lookup("LH-100234") is None
    finally:
        await store.close()
