"""The plan as a readable report with its arithmetic, or as JSON for machines."""

from __future__ import annotations

import math
from typing import Any

from kefu.bench.tables import render
from kefu.plan.calibrate import Calibration
from kefu.plan.hardware import GIB
from kefu.plan.planner import DevicePlan, Plan

HEADERS = [
    "device",
    "TP",
    "KV GiB",
    "seqs fit",
    "carries",
    "limit",
    "in flight",
    "TTFT",
    "TPOT",
    "replicas",
    "cards",
    "USD/month",
]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.0f} s"


def _gib(value: float) -> str:
    return f"{value:.2f}"


def _row(d: DevicePlan, unit: str) -> list[str]:
    m, c, load = d.memory, d.capacity, d.load
    if m is None or c is None:
        return [d.device.name, "-", "-", "0", "-", "weights do not fit", *["-"] * 6]
    carries = f"{c.demand:.1f} {unit}" if c.demand > 0 else "none"
    shown = load is not None and d.meets
    return [
        d.device.name,
        str(m.tp),
        _gib(m.kv_gib),
        str(m.sequences),
        carries,
        c.limit,
        f"{load.sequences:.1f}" if shown and load else "-",
        _ms(load.ttft_s) if shown and load else "-",
        _ms(load.tpot_s) if shown and load else "-",
        str(d.replicas) if d.replicas else "never",
        str(d.cards) if d.cards else "-",
        f"{d.monthly_usd:,.0f}" if d.monthly_usd is not None else "-",
    ]


def _model_lines(plan: Plan) -> list[str]:
    shape, weights = plan.model.shape, plan.model.weights
    params = shape.params()
    kv = plan.kv_bytes_per_token
    context = plan.traffic.tokens_in + plan.traffic.tokens_out
    lines = [
        f"model      {shape.name} ({plan.model.source}): {params.total / 1e9:.2f} B parameters, "
        f"{shape.active_params() / 1e9:.2f} B multiplied per token",
        f"weights    {plan.model.precision}",
        f"           = {weights.total / 1e9:.2f} GB = {weights.total / GIB:.2f} GiB",
    ]
    if shape.mla is not None:
        m = shape.mla
        rule = f"{shape.layers} layers x ({m.kv_lora_rank} latent + {m.rope_head_dim} rope)"
    else:
        rule = (
            f"2 (K, V) x {shape.layers} layers x {shape.kv_heads} KV heads x "
            f"{shape.head_dim} head_dim"
        )
    kv_type_bytes = kv / shape.kv_values_per_token()
    lines.append(
        f"KV cache   {rule} x {kv_type_bytes:g} B ({plan.options.kv_type}) = {kv:,.0f} B a token; "
        f"a turn's {context:g} tokens ({plan.traffic.tokens_in:g} in + "
        f"{plan.traffic.tokens_out:g} out) = {kv * context / 2**20:.1f} MiB"
    )
    return lines


def _traffic_lines(plan: Plan) -> list[str]:
    t = plan.traffic
    if t.closed_loop:
        demand = (
            f"traffic    {t.concurrent_chats:g} concurrent chats at peak, each thinking "
            f"{t.think_s:g} s between a reply and its next message"
        )
    else:
        assert t.daily_conversations is not None
        demand = (
            f"traffic    {t.daily_conversations:g} conversations/day x {t.turns:g} turns x "
            f"{t.peak_hour_share:.3g} in the peak hour / 3600 s x burst {t.burst:g} = "
            f"{t.peak_turns_per_s():.3g} turns/s at peak = "
            f"{t.peak_turns_per_s() * t.tokens_in:,.0f} tokens/s in, "
            f"{t.peak_turns_per_s() * t.tokens_out:,.0f} out"
        )
    return [
        demand,
        f"           / (1 - {t.headroom:g} headroom) = {t.planned_demand():.3g} {t.demand_unit} "
        f"planned; {t.tokens_in:g} tokens in, {t.tokens_out:g} out a turn",
        f"SLO        {plan.slo} (estimated means, the headroom covers the tail)",
    ]


def _arithmetic(d: DevicePlan, plan: Plan) -> list[str]:
    m, speed, load = d.memory, d.speed, d.load
    if m is None or speed is None or load is None:
        return []
    t = plan.traffic
    eff = speed.efficiency
    context = t.tokens_in + t.tokens_out / 2
    step = speed.decode_step(load.sequences, context)
    total = (d.replicas or 0) * load.turns_per_s
    return [
        f"on {d.replicas} replica(s) of {m.tp} x {d.device.name} ({d.device.memory_gib:g} GiB, "
        f"{d.device.bandwidth_gbs:g} GB/s, {d.device.tflops:g} TFLOP/s):",
        f"  memory   {d.device.memory_gib:g} GiB x {m.utilization:g} = {m.budget_gib:.2f}; "
        f"- weights {m.weights_gib:.2f} - activations {m.activation_gib:g} - runtime "
        f"{m.runtime_gib:g} = KV {m.kv_gib:.2f} GiB a card -> {m.sequences} sequences of "
        f"{m.context_tokens} tokens",
        f"  decode   step at {load.sequences:.1f} in flight = (weights read "
        f"{speed.weight_bytes_read(load.sequences) / 1e9:.2f} GB + KV "
        f"{load.sequences * context * speed.kv_bytes_per_token / 1e9:.3f} GB) / "
        f"({d.device.bandwidth_gbs * m.tp:g} GB/s x {eff.bandwidth:g})"
        + (f" x {eff.decode_scale:.3g} calibrated" if eff.decode_scale != 1 else "")
        + f" = {step * 1000:.1f} ms (or compute, if larger)",
        f"  prefill  2 x {speed.active_params / 1e9:.2f} B x {t.tokens_in:g} tokens / "
        f"({d.device.tflops * m.tp:g} TFLOP/s x {eff.compute:g})"
        + (f" x {eff.prefill_scale:.3g} calibrated" if eff.prefill_scale != 1 else "")
        + f" = {load.prefill_s * 1000:.0f} ms (or a read of the weights, if longer)",
        f"  load     {load.turns_per_s:.3g} turns/s a replica: prefills take "
        f"u = {load.prefill_share:.2f} of the time; TPOT = step / (1 - u) = "
        f"{_ms(load.tpot_s)}; TTFT = prefill + step + queue u/(2(1-u)) x prefill = "
        f"{_ms(load.ttft_s)}; in flight = rate x E2E = {load.sequences:.1f}",
        f"  total    {d.replicas} x {load.turns_per_s:.3g} turns/s = "
        f"{total:.3g} turns/s at the planned peak: {total * t.tokens_in:,.0f} tokens/s in, "
        f"{total * t.tokens_out:,.0f} out",
    ]


def _cpu_verdict(plan: Plan) -> str:
    d = plan.cpu
    device = d.device
    where = (
        f"{device.name}, {device.bandwidth_gbs:.1f} GB/s, {device.tflops * 1000:.0f} GFLOP/s, "
        f"{device.memory_gib:.0f} GiB RAM, {device.source}"
    )
    if d.memory is None:
        return f"CPU only   no: the weights do not fit in this machine's memory ({where})"
    if not d.meets:
        return f"CPU only   no: {d.why_not()} ({where})"
    if d.replicas == 1:
        return f"CPU only   yes: this machine carries the planned peak ({where})"
    return (
        f"CPU only   no: it would take {d.replicas} machines like this one, each carrying "
        f"{d.capacity.demand if d.capacity else 0:.1f} {plan.traffic.demand_unit} ({where})"
    )


def _calibration_lines(calibration: Calibration) -> list[str]:
    rows = []
    for c in calibration.rows:
        s, raw = c.observed, c.raw
        rows.append(
            [
                f"{s.load:g}",
                f"{s.rate:.2f}",
                f"{s.tokens_in:.0f}/{s.tokens_out:.0f}",
                _ms(s.ttft_s),
                _ms(raw.ttft_s) if raw else "overload",
                f"{s.ttft_s / raw.ttft_s:.2f}x" if raw else "-",
                _ms(s.tpot_s),
                _ms(raw.tpot_s) if raw else "overload",
                f"{s.tpot_s / raw.tpot_s:.2f}x" if raw else "-",
                _ms(c.calibrated.ttft_s),
                _ms(c.calibrated.tpot_s),
            ]
        )
    table = render(
        [
            "load",
            "LLM turns/s",
            "in/out",
            "TTFT meas",
            "est",
            "meas/est",
            "TPOT meas",
            "est",
            "meas/est",
            "TTFT cal",
            "TPOT cal",
        ],
        rows,
    )
    return [
        f"calibration: {calibration.source} ({calibration.label}) against the estimate for "
        f"{calibration.device}; prompt tokens from {calibration.tokens_in_from}",
        table,
        f"fitted scales (measured time / raw estimate): decode x{calibration.decode_scale:.2f}, "
        f"prefill x{calibration.prefill_scale:.2f}; every estimate below is scaled by them",
    ]


def text(plan: Plan, calibration: Calibration | None) -> str:
    unit = plan.traffic.demand_unit
    lines = [
        "kefu plan: roofline estimates, not measurements (`--calibrate` scales them with a "
        "kefu bench run)",
        "",
        *_model_lines(plan),
        *_traffic_lines(plan),
        "",
    ]
    if calibration is not None:
        lines += [*_calibration_lines(calibration), ""]
    lines.append(render(HEADERS, [_row(d, unit) for d in plan.cards]))
    lines.append(
        "carries: the most one replica (TP cards) takes within the SLO; limit: what stops "
        "it there; in flight, TTFT, TPOT: each replica at the planned peak"
    )
    lines.append("")
    cheapest = plan.cheapest
    if cheapest is None:
        reasons = "; ".join(f"{d.device.name}: {d.why_not()}" for d in plan.cards[:3])
        lines.append(f"no card meets this ({reasons})")
    else:
        lines.append(
            f"cheapest that meets the SLO: {cheapest.cards} x {cheapest.device.name}, about "
            f"${cheapest.monthly_usd:,.0f} a month (rough, dated rents: --rent NAME=USD)"
        )
        lines += _arithmetic(cheapest, plan)
    lines.append(_cpu_verdict(plan))
    return "\n".join(lines)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _device_json(d: DevicePlan) -> dict[str, Any]:
    m, c, load = d.memory, d.capacity, d.load
    return {
        "device": d.device.name,
        "memory_gib": d.device.memory_gib,
        "bandwidth_gbs": d.device.bandwidth_gbs,
        "tflops": d.device.tflops,
        "figures": d.device.source,
        "fits": m is not None,
        "tp": m.tp if m else None,
        "kv_gib_per_card": round(m.kv_gib, 3) if m else None,
        "sequences_fit": m.sequences if m else None,
        "capacity_per_replica": c.demand if c else None,
        "limit": c.limit if c else "memory",
        "meets": d.meets,
        "why_not": d.why_not() or None,
        "replicas": d.replicas,
        "cards": d.cards,
        "monthly_usd": d.monthly_usd,
        "at_peak": None
        if load is None or not d.meets
        else {
            "turns_per_s": load.turns_per_s,
            "in_flight": load.sequences,
            "prefill_s": load.prefill_s,
            "prefill_share": load.prefill_share,
            "ttft_s": _finite(load.ttft_s),
            "tpot_s": _finite(load.tpot_s),
        },
    }


def to_json(plan: Plan, calibration: Calibration | None) -> dict[str, Any]:
    shape, t = plan.model.shape, plan.traffic
    params = shape.params()
    cheapest = plan.cheapest
    return {
        "format": "kefu-plan/1",
        "estimate": "roofline",
        "model": {
            "name": shape.name,
            "source": plan.model.source,
            "precision": plan.model.precision,
            "params": params.total,
            "active_params": shape.active_params(),
            "weight_bytes": plan.model.weights.total,
            "kv_bytes_per_token": plan.kv_bytes_per_token,
            "kv_type": plan.options.kv_type,
        },
        "traffic": {
            "mode": "concurrent_chats" if t.closed_loop else "daily_conversations",
            "daily_conversations": t.daily_conversations,
            "turns": t.turns,
            "peak_hour_share": t.peak_hour_share,
            "burst": t.burst,
            "concurrent_chats": t.concurrent_chats,
            "think_s": t.think_s,
            "tokens_in": t.tokens_in,
            "tokens_out": t.tokens_out,
            "headroom": t.headroom,
            "peak_turns_per_s": None if t.closed_loop else t.peak_turns_per_s(),
            "planned_demand": t.planned_demand(),
            "unit": t.demand_unit,
        },
        "slo": plan.slo.bounds(),
        "efficiency": {
            "bandwidth": plan.options.efficiency.bandwidth,
            "compute": plan.options.efficiency.compute,
            "decode_scale": plan.options.efficiency.decode_scale,
            "prefill_scale": plan.options.efficiency.prefill_scale,
        },
        "gpu_memory_utilization": plan.options.utilization,
        "cards": [_device_json(d) for d in plan.cards],
        "cheapest": None
        if cheapest is None
        else {"device": cheapest.device.name, "cards": cheapest.cards, "usd": cheapest.monthly_usd},
        "cpu": _device_json(plan.cpu),
        "calibration": None
        if calibration is None
        else {
            "source": calibration.source,
            "device": calibration.device,
            "decode_scale": calibration.decode_scale,
            "prefill_scale": calibration.prefill_scale,
            "levels": [
                {
                    "load": c.observed.load,
                    "rate": c.observed.rate,
                    "tokens_in": c.observed.tokens_in,
                    "tokens_out": c.observed.tokens_out,
                    "ttft_measured_s": c.observed.ttft_s,
                    "ttft_estimated_s": c.raw.ttft_s if c.raw else None,
                    "tpot_measured_s": c.observed.tpot_s,
                    "tpot_estimated_s": c.raw.tpot_s if c.raw else None,
                    "ttft_calibrated_s": c.calibrated.ttft_s,
                    "tpot_calibrated_s": c.calibrated.tpot_s,
                }
                for c in calibration.rows
            ],
        },
    }
