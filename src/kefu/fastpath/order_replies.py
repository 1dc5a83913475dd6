"""The order tool's replies, templated in English and Chinese: no model call, no guessing.

A reply states only what the backend said: the status, then carrier, tracking
number, date and items when they are known. An unknown number gets a way
forward (check the number, or ask for a person), never a made-up status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kefu.fastpath.orders import Order

EXAMPLE_ORDER_ID = "LH-100234"

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
    order: Order | None, order_id: str | None, lang: str, *, example: str = EXAMPLE_ORDER_ID
) -> str:
    """The reply to an order question: the order's state; not found; or a request for the number.

    ``example`` is the order number shown to customers as the format to look for.
    """
    zh = lang == "zh"
    if order_id is None and order is None:
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
        if zh:
            return (
                f"没有找到订单 {order_id}。请核对订单号（格式如 {example}，可以在订单确认邮件中"
                "找到），或回复“转人工”联系人工客服。"
            )
        return (
            f"I couldn't find order {order_id}. Please check the number (it looks like {example}, "
            "in your confirmation email) or ask for a human agent."
        )
    return _describe_zh(order) if zh else _describe_en(order)


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


def _describe_en(order: Order) -> str:
    parts = [_STATUS_EN[order.status].format(id=order.id)]
    if order.status != "cancelled":  # a cancelled order's parcel is not the customer's concern
        if order.carrier:
            carried = f"Carrier: {order.carrier}"
            if order.tracking:
                carried += f", tracking number {order.tracking}"
            parts.append(carried + ".")
        elif order.tracking:
            parts.append(f"Tracking number: {order.tracking}.")
    if order.eta:
        if order.status == "delivered":
            parts.append(f"Delivered on {order.eta}.")
        elif order.status in ("processing", "shipped"):
            parts.append(f"Estimated delivery: {order.eta}.")
    if order.items:
        parts.append(f"Items: {', '.join(order.items)}.")
    return " ".join(parts)


def _describe_zh(order: Order) -> str:
    parts = [_STATUS_ZH[order.status].format(id=order.id)]
    if order.status != "cancelled":
        if order.carrier:
            carried = f"承运商：{order.carrier}"
            if order.tracking:
                carried += f"，运单号 {order.tracking}"
            parts.append(carried + "。")
        elif order.tracking:
            parts.append(f"运单号：{order.tracking}。")
    if order.eta:
        if order.status == "delivered":
            parts.append(f"签收日期：{order.eta}。")
        elif order.status in ("processing", "shipped"):
            parts.append(f"预计送达：{order.eta}。")
    if order.items:
        parts.append(f"商品：{'、'.join(order.items)}。")
    return "".join(parts)
