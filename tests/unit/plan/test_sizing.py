"""Roofline speeds by hand, and the sizing that follows from them."""

from __future__ import annotations

import pytest

from kefu.bench.slo import parse_slo
from kefu.plan.catalog import require_builtin
from kefu.plan.hardware import card
from kefu.plan.memory import fitting_groups
from kefu.plan.planner import Options, load_model, plan_device
from kefu.plan.precision import precision
from kefu.plan.sizing import capacity, load_at, load_at_rate, replicas_needed
from kefu.plan.speed import Efficiency, Speed
from kefu.plan.traffic import Traffic

PEAK = Efficiency(bandwidth=1.0, compute=1.0)


def _speed(model: str = "Llama-3.1-8B-Instruct", name: str = "H100") -> Speed:
    shape = require_builtin(model)
    weights = precision("bf16").weight_bytes(shape.params())
    return Speed(shape, weights, shape.kv_values_per_token() * 2, card(name), 1, PEAK)


def test_a_single_sequence_decode_step_reads_the_weights_once() -> None:
    speed = _speed()
    # All weights but the 128256 x 4096 input embedding, 2 bytes each, plus 1000 tokens
    # of KV at 131 072 bytes, over 3350 GB/s.
    read = 2 * (8_030_261_248 - 128_256 * 4096) + 1000 * 131_072
    assert speed.decode_step(1, 1000) == pytest.approx(read / 3350e9)
    # 64 sequences share the weights: far less than 64 times one.
    assert speed.decode_step(64, 1000) < 4 * speed.decode_step(1, 1000)


def test_prefill_is_compute_bound_flops() -> None:
    speed = _speed()
    active = 8_030_261_248 - 128_256 * 4096
    attention = 4 * 32 * 32 * 128 * 2000 * 2000 / 2
    assert speed.prefill(2000) == pytest.approx((2 * active * 2000 + attention) / 989e12)


def test_moe_steps_read_more_experts_as_the_batch_grows() -> None:
    speed = _speed("Mixtral-8x7B-Instruct-v0.1", "H200")
    one, many = speed.weight_bytes_read(1), speed.weight_bytes_read(64)
    experts = speed.weights.experts
    assert many - one == pytest.approx(experts * (8 - 2) / 8, rel=1e-3)


def test_load_grows_with_the_rate_until_the_replica_cannot_keep_up() -> None:
    speed = _speed()
    light = load_at_rate(speed, 512, 150, 1.0)
    heavy = load_at_rate(speed, 512, 150, 20.0)
    assert light is not None
    assert heavy is not None
    assert light.ttft_s < heavy.ttft_s
    assert light.tpot_s < heavy.tpot_s
    # Little's law: in flight = rate x E2E
    assert heavy.sequences == pytest.approx(20.0 * heavy.e2e_s(150), rel=1e-5)
    # Prefills alone would take more than all of the device's time.
    assert load_at_rate(speed, 512, 150, 1.01 / speed.prefill(512)) is None


def test_a_closed_loop_of_chats_sends_chats_over_e2e_plus_think() -> None:
    speed = _speed()
    traffic = Traffic(tokens_in=512, tokens_out=150, concurrent_chats=40, think_s=20)
    load = load_at(speed, traffic, 40)
    assert load is not None
    assert load.turns_per_s * (load.e2e_s(150) + 20) == pytest.approx(40, rel=1e-3)


def test_replicas_cover_the_demand_within_the_slo() -> None:
    shape = require_builtin("Qwen2.5-7B-Instruct")
    weights = precision("bf16").weight_bytes(shape.params())
    kv = shape.kv_values_per_token() * 2
    l20 = card("L20")
    memory = fitting_groups(l20, weights, kv, 662, utilization=0.9, activation_gib=None, moe=False)[
        0
    ]
    speed = Speed(shape, weights, kv, l20, memory.tp, Efficiency())
    traffic = Traffic(tokens_in=512, tokens_out=150, daily_conversations=1e6)
    slo = parse_slo("ttft=1s,tpot=100ms")
    one = capacity(speed, memory, traffic, slo)
    assert one.demand > 0
    needed = replicas_needed(traffic.planned_demand(), one)
    assert needed is not None
    assert needed > 1
    share = load_at(speed, traffic, traffic.planned_demand() / needed)
    assert share is not None
    assert share.ttft_s <= 1.0
    assert share.tpot_s <= 0.1
    # An SLO below one prefill alone: no number of cards meets it.
    impossible = capacity(speed, memory, traffic, parse_slo("ttft=10ms"))
    assert impossible.demand == 0
    assert impossible.limit == "TTFT"
    assert replicas_needed(traffic.planned_demand(), impossible) is None


def test_peak_rate_arithmetic() -> None:
    traffic = Traffic(
        tokens_in=512, tokens_out=150, daily_conversations=20_000, turns=4, headroom=0.3
    )
    # 20 000 x 4 turns / 24 h = 0.926 turns/s on average, x 5 burst
    assert traffic.peak_turns_per_s() == pytest.approx(20_000 * 4 / 86_400 * 5)
    assert traffic.planned_demand() == pytest.approx(traffic.peak_turns_per_s() / 0.7)


def test_the_plan_picks_the_group_size_that_needs_the_fewest_cards() -> None:
    model = load_model("Qwen2.5-72B-Instruct", "int4")
    traffic = Traffic(tokens_in=512, tokens_out=150, daily_conversations=200_000)
    slo = parse_slo("ttft=1s,tpot=100ms")
    l20 = card("L20")
    chosen = plan_device(model, l20, traffic, slo, Options())
    assert chosen.cards is not None
    kv = model.shape.kv_values_per_token() * 2
    groups = fitting_groups(
        l20, model.weights, kv, 662, utilization=0.9, activation_gib=None, moe=False
    )
    assert [g.tp for g in groups] == [2, 4, 8]  # 41 GB of 4-bit weights need two
    cards = {}
    for memory in groups:
        speed = Speed(model.shape, model.weights, kv, l20, memory.tp, Efficiency())
        replicas = replicas_needed(traffic.planned_demand(), capacity(speed, memory, traffic, slo))
        assert replicas is not None
        cards[memory.tp] = replicas * memory.tp
    assert chosen.cards == min(cards.values())
    assert chosen.memory is not None
    assert cards[chosen.memory.tp] == chosen.cards
