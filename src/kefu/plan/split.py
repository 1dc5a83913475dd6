"""Several small models (kefu's model groups, one per intent) against one big model.

Three 1B models behind an intent classifier (FAQ, orders, logistics) in place of one 7B take
less memory and may serve more. ``--split MODEL=SHARE`` plans each small model on its share
of the traffic, on every device, beside the ``--model`` plan:

- separate: each group on cards of its own (kefu's groups are separate pools), so a group
  needs at least one replica however little it carries;
- packed: the small models side by side on shared cards, possible when every model's
  weights and allowances fit one card's budget together. Their decode steps take turns,
  so each model's share of a card is its demand over what one card carries for it alone,
  and the cards are the sum of those shares, rounded up. An estimate on the same
  roofline as the rest, optimistic in that each model is sized as if it had the card's
  whole KV cache; a model's TPOT grows by the others' steps while they are busy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kefu.bench.slo import Slo
from kefu.plan import PlanError, named_number
from kefu.plan.hardware import GIB, Device
from kefu.plan.planner import DevicePlan, Model, Options, plan_device
from kefu.plan.traffic import Traffic

SHARE_SLACK = 0.01  # shares written to two decimals may sum to 0.99 or 1.01


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    share: float
    model: Model


def parse_split(values: list[str]) -> list[tuple[str, float]]:
    """``MODEL=SHARE`` pairs, the shares summing to 1."""
    usage = "MODEL=SHARE, e.g. Qwen2.5-1.5B=0.5"
    parts = [named_number(v, "--split", usage, lambda share: 0 < share <= 1) for v in values]
    total = sum(share for _, share in parts)
    if parts and abs(total - 1) > SHARE_SLACK:
        raise PlanError(f"--split shares add up to {total:g}; they must add up to 1")
    return parts


def share_of(traffic: Traffic, share: float) -> Traffic:
    if traffic.closed_loop:
        assert traffic.concurrent_chats is not None
        return replace(traffic, concurrent_chats=traffic.concurrent_chats * share)
    assert traffic.daily_conversations is not None
    return replace(traffic, daily_conversations=traffic.daily_conversations * share)


@dataclass(frozen=True, slots=True)
class SplitPart:
    """One part on one device: its plan on its share of the traffic."""

    part: Part
    plan: DevicePlan
    demand: float  # what it must carry: its share of the planned demand

    @property
    def busy(self) -> float | None:
        """Cards' worth of time it takes: its demand over what one card carries for it."""
        plan = self.plan
        if plan.memory is None or plan.capacity is None or plan.capacity.demand <= 0:
            return None
        return self.demand / plan.capacity.demand


@dataclass(frozen=True, slots=True)
class SplitRow:
    device: Device
    parts: list[SplitPart]

    @property
    def separate_cards(self) -> int | None:
        cards = [p.plan.cards for p in self.parts]
        return None if any(c is None for c in cards) else sum(c or 0 for c in cards)

    @property
    def packed_fits(self) -> bool:
        """Whether every part's weights and allowances fit one card together (each on one
        card a replica)."""
        memories = [p.plan.memory for p in self.parts]
        if any(m is None or m.tp != 1 for m in memories):
            return False
        fixed = sum(m.weights_gib + m.activation_gib + m.runtime_gib for m in memories if m)
        return memories[0] is not None and fixed < memories[0].budget_gib

    @property
    def packed_carries(self) -> float | None:
        """The demand one card carries with every part on it, time-shared: a unit of
        demand takes sum(share / capacity) of a card. None where they do not fit or a
        part meets the SLO nowhere."""
        busy = [p.busy for p in self.parts]
        if not self.packed_fits or any(b is None or b <= 0 for b in busy):
            return None
        return 1 / sum(p.part.share / (p.demand / (p.busy or 1)) for p in self.parts)

    @property
    def packed_cards(self) -> int | None:
        """Cards with every part on each, time-shared."""
        busy = [p.busy for p in self.parts]
        if not self.packed_fits or any(b is None for b in busy):
            return None
        return max(1, math.ceil(sum(b or 0.0 for b in busy) - 1e-9))

    def monthly_usd(self, cards: int | None) -> float | None:
        if cards is None or self.device.monthly_usd is None:
            return None
        return cards * self.device.monthly_usd


def weights_gib(parts: list[Part]) -> float:
    return sum(part.model.weights.total for part in parts) / GIB


def plan_split(
    parts: list[Part], traffic: Traffic, slo: Slo, options: Options, devices: list[Device]
) -> list[SplitRow]:
    """Every part on every device, on its share of ``traffic``."""
    rows = []
    for device in devices:
        planned = []
        for part in parts:
            mine = share_of(traffic, part.share)
            plan = plan_device(part.model, device, mine, slo, options)
            planned.append(SplitPart(part, plan, mine.planned_demand()))
        rows.append(SplitRow(device, planned))
    return rows
