"""``--split``'s part of the plan: several small models against the one, as text or JSON."""

from __future__ import annotations

from typing import Any

from kefu.bench.tables import render
from kefu.plan.hardware import GIB
from kefu.plan.planner import DevicePlan, Plan
from kefu.plan.split import Part, SplitRow, weights_gib

HEADERS = [
    "device",
    "one: carries",
    "cards",
    "USD/month",
    "separate: cards",
    "USD/month",
    "packed: carries",
    "cards",
    "USD/month",
]


def _usd(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "-"


def _cards(cards: int | None) -> str:
    return str(cards) if cards is not None else "never"


def _rows(plan: Plan, rows: list[SplitRow]) -> list[tuple[DevicePlan, SplitRow]]:
    one = {d.device.name: d for d in [*plan.cards, plan.cpu]}
    return [(one[row.device.name], row) for row in rows]


def _carries(value: float | None, unit: str) -> str:
    return f"{value:.3g} {unit}" if value is not None and value > 0 else "none"


def text(plan: Plan, parts: list[Part], rows: list[SplitRow]) -> str:
    unit = plan.traffic.demand_unit
    big = plan.model.weights.total / GIB
    names = ", ".join(f"{p.model.shape.name} x {p.share:g}" for p in parts)
    lines = [
        f"split      {names} of the traffic, each model its own group (kefu's --engines-file "
        "groups), against the one model",
        f"           weights {weights_gib(parts):.2f} GiB in all against {big:.2f} GiB; "
        "separate: each group on cards of its own; packed: all on shared cards, their decode "
        "steps taking turns (a model's TPOT grows by the others' steps while they are busy)",
    ]
    table = []
    for one, row in _rows(plan, rows):
        per_part = "+".join(_cards(p.plan.cards) for p in row.parts)
        separate, packed = row.separate_cards, row.packed_cards
        table.append(
            [
                row.device.name,
                _carries(one.capacity.demand if one.capacity else None, unit),
                _cards(one.cards),
                _usd(one.monthly_usd),
                f"{_cards(separate)} ({per_part})",
                _usd(row.monthly_usd(separate)),
                _carries(row.packed_carries, unit) if row.packed_fits else "do not fit",
                _cards(packed) if row.packed_fits else "-",
                _usd(row.monthly_usd(packed)),
            ]
        )
    lines.append(render(HEADERS, table))
    priced = [
        (usd, f"{cards} x {row.device.name} {how}")
        for _, row in _rows(plan, rows)
        for how, cards in (("separate", row.separate_cards), ("packed", row.packed_cards))
        if (usd := row.monthly_usd(cards)) is not None
    ]
    if priced:
        usd, what = min(priced)
        cheapest = plan.cheapest
        against = (
            f"; the one model: {cheapest.cards} x {cheapest.device.name}, about "
            f"${cheapest.monthly_usd:,.0f}"
            if cheapest is not None and cheapest.monthly_usd is not None
            else "; no card carries the one model"
        )
        lines.append(f"cheapest split: {what}, about ${usd:,.0f} a month{against}")
    return "\n".join(lines)


def to_json(plan: Plan, parts: list[Part], rows: list[SplitRow]) -> dict[str, Any]:
    return {
        "parts": [
            {
                "model": p.model.shape.name,
                "asked_as": p.name,
                "share": p.share,
                "weight_bytes": p.model.weights.total,
            }
            for p in parts
        ],
        "weight_bytes": sum(p.model.weights.total for p in parts),
        "devices": [
            {
                "device": row.device.name,
                "one_cards": one.cards,
                "one_usd": one.monthly_usd,
                "separate_cards": row.separate_cards,
                "cards_by_part": [p.plan.cards for p in row.parts],
                "separate_usd": row.monthly_usd(row.separate_cards),
                "one_carries": one.capacity.demand if one.capacity else None,
                "packed_fits": row.packed_fits,
                "packed_carries": row.packed_carries,
                "packed_cards": row.packed_cards,
                "packed_usd": row.monthly_usd(row.packed_cards),
            }
            for one, row in _rows(plan, rows)
        ],
    }
