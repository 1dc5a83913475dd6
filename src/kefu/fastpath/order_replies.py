"""The order tool's replies, templated in English and Chinese: no model call, no guessing.

A reply states only what the backend said: the status, then carrier, tracking
number, date and items when they are known. An unknown number gets a way
forward (check the number, or ask for a person), never a made-up status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kefu.fastpath.order import Order

_STATUS_EN = {
    "processing": "Order {id} is being prepared in our warehouse and has not shipped yet.",
    "shipped": "Order {id} has shipped.",
    "out_for_delivery": "Order {id} is out for delivery today.",
    "delivered": "Order {id} has been delivered.",
    "cancelled": "Order {id} was cancelled.",
    "returned": "Order {id} was returned to us.",
}
_STATUS_ZH = {
    "processing": "订单 {id} 正在仓库备货中，尚未发货。",
    "shipped": "订单 {id} 已发货。",
    "out_for_delivery": "订单 {id} 今天正在派送中。",
    "delivered": "订单 {id} 已签收。",
    "cancelled": "订单 {id} 已取消。",
    "returned": "订单 {id} 已退回。",
}


def order_reply(
    order: Order | None,
    order_id: str | None,
    lang: str,
    *,
    example: str | None = None,
    mistyped: str | None = None,
) -> str:
    """The reply to an order question: the order's state; not found; the number given is
    not one (``mistyped``); or a request for the number.

    ``example`` is the order number shown to customers as the format to look for (a
    number is only ``mistyped`` against one).
    """
    zh = lang == "zh"
    if order_id is None and order is None and mistyped is not None:
        if zh:
            return (
                f"{mistyped} 不是有效的订单号。订单号的格式如 {example}，可以在订单确认邮件中"
                "找到，请核对后再发给我。"
            )
        return (
            f"{mistyped} doesn't look like one of our order numbers: they look like {example} "
            "and are in your order confirmation email. Could you check it and send it again?"
        )
    if order_id is None and order is None:
        if example is None:
            if zh:
                return "好的，请告诉我您的订单号（可以在订单确认邮件中找到），我来帮您查询。"
            return "Sure — what is your order number? It is in your order confirmation email."
        if zh:
            return (
                f"好的，请告诉我您的订单号（格式如 {example}，可以在订单确认邮件中找到），"
                "我来帮您查询。"
            )
        return (
            f"Sure — what is your order number? It looks like {example} and is in your "
            "order confirmation email."
        )
    if order is None:
        if example is None:
            if zh:
                return f"没有找到订单 {order_id}。请核对订单号，或回复“转人工”联系人工客服。"
            return (
                f"I couldn't find order {order_id}. Please check the number (it is in your "
                "confirmation email) or ask for a human agent."
            )
        if zh:
            return (
                f"没有找到订单 {order_id}。请核对订单号（格式如 {example}，可以在订单确认邮件中"
                "找到），或回复“转人工”联系人工客服。"
            )
        return (
            f"I couldn't find order {order_id}. Please check the number (it looks like {example}, "
            "in your confirmation email) or ask for a human agent."
        )
    return _describe(order, _ZH if zh else _EN)


def order_unavailable_reply(order_id: str | None, lang: str) -> str:
    """When the backend cannot answer: say so, never guess a status."""
    if lang == "zh":
        which = f"订单 {order_id} 的" if order_id else "订单"
        return f"抱歉，暂时无法查询{which}状态，请过几分钟再试，或回复“转人工”联系人工客服。"
    which = f"order {order_id}" if order_id else "orders"
    return (
        f"Sorry, I can't look up {which} right now. Please try again in a few minutes, "
        "or ask for a human agent."
    )


@dataclass(frozen=True, slots=True)
class _Phrases:
    status: Mapping[str, str]
    carrier: str
    with_tracking: str
    tracking: str
    delivered: str
    eta: str
    items: str
    item_separator: str
    stop: str
    space: str


_EN = _Phrases(
    _STATUS_EN,
    "Carrier: {}",
    ", tracking number {}",
    "Tracking number: {}",
    "Delivered on {}",
    "Estimated delivery: {}",
    "Items: {}",
    ", ",
    ".",
    " ",
)
_ZH = _Phrases(
    _STATUS_ZH,
    "承运商：{}",
    "，运单号 {}",
    "运单号：{}",
    "签收日期：{}",
    "预计送达：{}",
    "商品：{}",
    "、",
    "。",
    "",
)


def _describe(order: Order, say: _Phrases) -> str:
    parts = [say.status[order.status].format(id=order.id)]
    if order.status != "cancelled":  # a cancelled order's parcel is not the customer's concern
        if order.carrier:
            carried = say.carrier.format(order.carrier)
            if order.tracking:
                carried += say.with_tracking.format(order.tracking)
            parts.append(carried + say.stop)
        elif order.tracking:
            parts.append(say.tracking.format(order.tracking) + say.stop)
    if order.eta:
        if order.status == "delivered":
            parts.append(say.delivered.format(order.eta) + say.stop)
        elif order.status in ("processing", "shipped"):
            parts.append(say.eta.format(order.eta) + say.stop)
    if order.items:
        parts.append(say.items.format(say.item_separator.join(order.items)) + say.stop)
    return say.space.join(parts)
