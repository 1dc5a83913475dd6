"""The demo shop's sample orders: Lumen Home, LH-100001 to LH-100030 and LH-100234.

Deterministic apart from the dates, which are relative to the day the file is
created (a demo order "shipped" two years ago reads as a bug). Every status
appears at least four times; items are English for odd numbers and Chinese for
even ones, so both demo languages have orders to ask about. LH-100234 is the
example number the replies and the demo FAQ show, so trying it finds an order.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from kefu.fastpath.order import STATUSES, Order, Status

CARRIERS = (
    ("Ninja Van", "NV"),
    ("J&T Express", "JT"),
    ("SF Express", "SF"),
    ("DHL Express", "DH"),
    ("SingPost", "SP"),
)
ITEMS_EN = (
    "Oak dining table",
    "Linen sofa cover",
    "Ceramic table lamp",
    "Wool throw blanket",
    "Walnut bookshelf",
    "Cotton bed sheets (queen)",
    "Rattan armchair",
    "Glass flower vase",
    "Bamboo bath mat",
    "Brass pendant light",
    "Set of 4 stoneware mugs",
)
ITEMS_ZH = (
    "橡木餐桌",
    "亚麻沙发套",
    "陶瓷台灯",
    "羊毛盖毯",
    "胡桃木书架",
    "纯棉床单（双人）",
    "藤编扶手椅",
    "玻璃花瓶",
    "竹制浴室地垫",
    "黄铜吊灯",
    "粗陶马克杯四件套",
)
# Days from today: (estimated delivery for open orders, or the delivery date; last update).
_DAYS = {
    "processing": (4, 0),
    "shipped": (2, -1),
    "out_for_delivery": (0, 0),
    "delivered": (-3, -3),
    "cancelled": (None, -5),
    "returned": (None, -8),
}


def sample_orders(today: date) -> list[Order]:
    orders = [_order(n, today) for n in range(1, 31)]
    orders.append(_order(234, today, status="shipped"))
    return orders


def _order(n: int, today: date, status: Status | None = None) -> Order:
    status = status or STATUSES[(n - 1) % len(STATUSES)]
    names = ITEMS_EN if n % 2 else ITEMS_ZH
    count = 1 + n % 3
    items = tuple(names[(n * 3 + i * 5) % len(names)] for i in range(count))
    carrier_name, prefix = CARRIERS[n % len(CARRIERS)]
    shipped = status not in ("processing", "cancelled")
    eta_days, updated_days = _DAYS[status]
    eta = None if eta_days is None else (today + timedelta(days=eta_days)).isoformat()
    updated = datetime.combine(today + timedelta(days=updated_days), time(9 + n % 8, 5 * n % 60))
    return Order(
        id=f"LH-{100000 + n}",
        status=status,
        carrier=carrier_name if shipped else None,
        tracking=f"{prefix}{7310000000 + n * 7919}" if shipped else None,
        eta=eta,
        items=items,
        updated_at=updated.isoformat(timespec="minutes") + "+08:00",
    )
