"""The card table and this machine's CPU, measured or given."""

from __future__ import annotations

import pytest

from kefu.plan import PlanError
from kefu.plan.hardware import CARDS, card, cpu, with_rent


def test_cards_are_found_by_loose_names_and_rents_can_be_replaced() -> None:
    assert card("a100-80gb").name == "A100 80GB"
    assert card("rtx4090").memory_gib == pytest.approx(23.6)
    [l20, h100] = with_rent([card("L20"), card("H100")], {"l20": 700.0})
    assert (l20.monthly_usd, h100.monthly_usd) == (700.0, CARDS["H100"].monthly_usd)
    with pytest.raises(PlanError, match="unknown card 'TPU'"):
        card("TPU")


def test_the_cpu_is_measured_unless_given() -> None:
    given = cpu(25.0, 0.2, 2)
    assert (given.bandwidth_gbs, given.tflops, given.source) == (25.0, 0.2, "given")
    measured = cpu(None, None, 1)
    assert measured.bandwidth_gbs > 0.1
    assert measured.tflops > 1e-4
    assert measured.source == "measured here (bandwidth, float32 matmul)"
    assert not measured.is_gpu
    assert measured.memory_gib > 0.5
