"""An order as the order_status tool reads it from a backend and tells it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

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
