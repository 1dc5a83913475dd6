"""The fast path's answers by rule, before any embedding: a handoff request, an order's
status, smalltalk."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from kefu.errors import Unavailable
from kefu.fastpath.hours import ServiceHours, handoff_reply
from kefu.fastpath.orders import OrderBackend, order_reply, order_unavailable_reply
from kefu.fastpath.router import Routing
from kefu.fastpath.smalltalk import smalltalk_reply
from kefu.service.plan import Plan
from kefu.settings import Settings

log = logging.getLogger("kefu.fastpath")


async def answer_by_rule(
    routing: Routing,
    lang: str,
    mistyped: str | None,
    *,
    settings: Settings,
    orders: OrderBackend,
    hours: ServiceHours,
) -> Plan:
    """The plan for a message the rules routed to a handoff, an order or smalltalk."""
    if routing.intent == "handoff":
        reply = handoff_reply(hours, datetime.now(UTC), lang, routing.reason)
        return Plan(routing, lang, "handoff", reply)
    if routing.intent == "order_status":
        example = settings.order_example
        if routing.order_id is None:
            reply = order_reply(None, None, lang, example=example, mistyped=mistyped)
            return Plan(routing, lang, "tool", reply)
        try:
            order = await orders.lookup(routing.order_id)
        except Unavailable as exc:
            log.warning("order lookup failed: %s", exc.message)
            reply = order_unavailable_reply(routing.order_id, lang)
            return Plan(routing, lang, "tool", reply)
        reply = order_reply(order, routing.order_id, lang, example=example)
        return Plan(routing, lang, "tool", reply)
    kind = routing.candidates[0].detail or "greeting"
    reply = smalltalk_reply(
        kind,
        lang,
        shop_name=settings.shop_name,
        order_example=settings.order_example,
    )
    return Plan(routing, lang, "smalltalk", reply)
