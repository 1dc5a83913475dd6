"""An order as the order_status tool reads it from a backend and tells it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

Status = Literal["processing", "shipped", "out_for_delivery", "delivered", "cancelled", "returned"]
STATUSES: tuple[Status, ...] = get_args(Status)


@dataclass(frozen=True, slots=True)
class Order:
    id: str
    status: Status
    carrier: str | None
    tracking: str | None
    eta: str | None  # ISO date: expected delivery, or the day it was delivered
    items: tuple[str, ...]
    updated_at: str  # ISO date-time of the last status change


def order_from(data: Mapping[str, Any], order_id: str) -> Order:
    """An Order from a backend's fields (``id`` defaults to ``order_id``); ValueError names
    the first field that is wrong. For every backend, kefu's and a shop's own."""
    status = data.get("status")
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    items = data.get("items") or []
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError("items must be a list of strings")
    fields: dict[str, str | None] = {}
    for name in ("id", "carrier", "tracking", "eta", "updated_at"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
        fields[name] = value or None
    return Order(
        id=fields["id"] or order_id,
        status=status,
        carrier=fields["carrier"],
        tracking=fields["tracking"],
        eta=fields["eta"],
        items=tuple(items),
        updated_at=fields["updated_at"] or "",
    )
