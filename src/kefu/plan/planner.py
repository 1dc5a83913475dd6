"""The plan: a model, a traffic profile and an SLO against every card and this CPU."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from kefu.bench.slo import Slo
from kefu.plan import PlanError
from kefu.plan.catalog import require_builtin
from kefu.plan.gguf_model import read_gguf
from kefu.plan.hardware import Device
from kefu.plan.memory import MemoryPlan, fitting_groups
from kefu.plan.model import ModelShape, read_config
from kefu.plan.precision import WeightBytes, kv_bytes, precision
from kefu.plan.sizing import Capacity, Load, capacity, load_at, replicas_needed
from kefu.plan.speed import Efficiency, Speed
from kefu.plan.traffic import Traffic

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True, slots=True)
class Model:
    shape: ModelShape
    weights: WeightBytes
    precision: str  # what the weights are stored as
    source: str  # built-in, config.json or GGUF


def load_model(spec: str, precision_name: str) -> Model:
    """``spec``: a .gguf file, a config.json (or a model folder holding one), or a
    built-in model's name."""
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".gguf" or _starts_with_magic(path):
        gguf_model = read_gguf(path)
        label = f"{gguf_model.file_type} ({gguf_model.bits_per_weight:.2f} bits/weight)"
        return Model(gguf_model.shape, gguf_model.weights, label, "GGUF file")
    chosen = precision(precision_name)
    if path.suffix == ".json" or path.exists():
        shape = read_config(path)
        source = "config.json"
    else:
        shape = require_builtin(spec)
        source = "built-in"
    weights = chosen.weight_bytes(shape.params())
    return Model(shape, weights, f"{chosen.name}: {chosen.about}", source)


def _starts_with_magic(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Options:
    utilization: float = 0.9
    activation_gib: float | None = None
    kv_type: str = "fp16"
    efficiency: Efficiency = field(default_factory=Efficiency)

    def __post_init__(self) -> None:
        if not 0 < self.utilization <= 1:
            raise PlanError(f"--gpu-memory-utilization must be in (0, 1], not {self.utilization:g}")
        if self.activation_gib is not None and self.activation_gib < 0:
            raise PlanError(f"--activation-gib must be >= 0, not {self.activation_gib:g}")
        for name, value in (
            ("--bandwidth-efficiency", self.efficiency.bandwidth),
            ("--compute-efficiency", self.efficiency.compute),
        ):
            if not 0 < value <= 1:
                raise PlanError(f"{name} must be in (0, 1], not {value:g}")
        kv_bytes(self.kv_type)


@dataclass(frozen=True, slots=True)
class DevicePlan:
    device: Device
    memory: MemoryPlan | None  # None: the weights do not fit even 8 of these
    speed: Speed | None
    capacity: Capacity | None  # per replica
    replicas: int | None  # None: no number of these meets the SLO
    load: Load | None  # each replica's share of the planned demand

    @property
    def cards(self) -> int | None:
        if self.replicas is None or self.memory is None:
            return None
        return self.replicas * self.memory.tp

    @property
    def monthly_usd(self) -> float | None:
        if self.cards is None or self.device.monthly_usd is None:
            return None
        return self.cards * self.device.monthly_usd

    @property
    def meets(self) -> bool:
        return self.replicas is not None

    def why_not(self) -> str:
        """Why no number of these devices meets the plan (empty when some number does)."""
        if self.memory is None:
            return "the weights do not fit, even on 8"
        if self.capacity is None or self.capacity.demand > 0:
            return ""
        alone = self.load
        if alone is None:
            return "it cannot keep up with even a trickle of turns"
        return (
            f"one turn alone: TTFT {alone.ttft_s:.2f} s, TPOT {alone.tpot_s * 1000:.0f} ms, "
            f"missing {self.capacity.limit}"
        )


def plan_device(
    model: Model, device: Device, traffic: Traffic, slo: Slo, options: Options
) -> DevicePlan:
    """The group size (tensor parallelism) that needs the fewest of ``device``; the smallest
    that holds the model when none meets the SLO."""
    kv_per_token = model.shape.kv_values_per_token() * kv_bytes(options.kv_type)
    groups = fitting_groups(
        device,
        model.weights,
        kv_per_token,
        math.ceil(traffic.tokens_in + traffic.tokens_out),
        utilization=options.utilization,
        activation_gib=options.activation_gib,
        moe=model.shape.moe is not None,
    )
    best = DevicePlan(device, None, None, None, None, None)
    for memory in groups:
        speed = Speed(
            model.shape, model.weights, kv_per_token, device, memory.tp, options.efficiency
        )
        per_replica = capacity(speed, memory, traffic, slo)
        replicas = replicas_needed(traffic.planned_demand(), per_replica)
        share = traffic.planned_demand() / replicas if replicas else 1e-6
        plan = DevicePlan(
            device, memory, speed, per_replica, replicas, load_at(speed, traffic, share)
        )
        if best.memory is None or (plan.cards or math.inf) < (best.cards or math.inf):
            best = plan
    return best


@dataclass(frozen=True, slots=True)
class Plan:
    model: Model
    traffic: Traffic
    slo: Slo
    options: Options
    cards: list[DevicePlan]
    cpu: DevicePlan

    @property
    def kv_bytes_per_token(self) -> float:
        return self.model.shape.kv_values_per_token() * kv_bytes(self.options.kv_type)

    @property
    def cheapest(self) -> DevicePlan | None:
        priced = [c for c in self.cards if c.meets and c.monthly_usd is not None]
        return min(priced, key=lambda c: c.monthly_usd or 0.0, default=None)


def make_plan(
    model: Model,
    traffic: Traffic,
    slo: Slo,
    options: Options,
    cards: list[Device],
    cpu: Device,
) -> Plan:
    if any(not bound > 0 for bound in slo.bounds().values()):
        raise PlanError(f"--slo {slo}: bounds must be > 0")
    return Plan(
        model,
        traffic,
        slo,
        options,
        [plan_device(model, card, traffic, slo, options) for card in cards],
        plan_device(model, cpu, traffic, slo, options),
    )
