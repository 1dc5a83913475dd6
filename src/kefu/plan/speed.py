"""Roofline estimates of one replica's speed, and they are only that.

A decode step reads the weights it needs once for the whole batch plus every sequence's
KV, and multiplies 2 FLOPs per active parameter per sequence: its time is the larger of
bytes / bandwidth and FLOPs / compute. A prefill of P tokens is 2 x active parameters x P
FLOPs plus attention's quadratic term. Peaks are scaled by efficiencies (the share of
datasheet bandwidth and compute a real engine reaches) and, after ``--calibrate``, by
what a real ``kefu bench`` run measured. Tensor parallelism is taken as ideal: its
all-reduce cost is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from kefu.plan.hardware import Device
from kefu.plan.model import ModelShape
from kefu.plan.precision import WeightBytes

# Shares of the datasheet peak a serving engine reaches: decode kernels stream weights at
# roughly 60-80 % of peak bandwidth, prefill matmuls at 40-60 % of peak FLOP/s.
DEFAULT_BANDWIDTH_EFFICIENCY = 0.7
DEFAULT_COMPUTE_EFFICIENCY = 0.5


@dataclass(frozen=True, slots=True)
class Efficiency:
    bandwidth: float = DEFAULT_BANDWIDTH_EFFICIENCY
    compute: float = DEFAULT_COMPUTE_EFFICIENCY
    decode_scale: float = 1.0  # measured / estimated decode step, from --calibrate
    prefill_scale: float = 1.0  # measured / estimated prefill, from --calibrate


class Speed:
    """Time of a decode step and of a prefill on one replica of ``tp`` devices."""

    def __init__(
        self,
        shape: ModelShape,
        weights: WeightBytes,
        kv_bytes_per_token: float,
        device: Device,
        tp: int,
        efficiency: Efficiency,
    ) -> None:
        self.shape, self.weights, self.device, self.tp = shape, weights, device, tp
        self.kv_bytes_per_token = kv_bytes_per_token
        self.efficiency = efficiency
        # Bytes and FLOP/s the replica really reaches.
        self.bandwidth = device.bandwidth_gbs * 1e9 * tp * efficiency.bandwidth
        self.flops = device.tflops * 1e12 * tp * efficiency.compute
        self.active_params = shape.active_params()
        self.attention_flops = shape.attention_flops_per_context_token()
        # A step reads every weight but the input embedding (the head, when tied to it).
        self.always_read = weights.dense + (
            weights.embedding if shape.tied_embeddings else weights.head
        )

    def with_efficiency(self, efficiency: Efficiency) -> Speed:
        return Speed(
            self.shape, self.weights, self.kv_bytes_per_token, self.device, self.tp, efficiency
        )

    def weight_bytes_read(self, batch: float) -> float:
        """Weights one decode step reads; of the routed experts, those its tokens chose."""
        if self.shape.moe is None:
            return self.always_read
        share = self.shape.experts_touched(batch) / self.shape.moe.experts
        return self.always_read + self.weights.experts * share

    def decode_step(self, batch: float, context: float) -> float:
        """Seconds of one step that gives each of ``batch`` sequences of ``context`` tokens
        one more token."""
        sequences = max(batch, 1.0)
        kv = sequences * context * self.kv_bytes_per_token
        memory = (self.weight_bytes_read(sequences) + kv) / self.bandwidth
        per_token = 2 * self.active_params + self.attention_flops * context
        compute = sequences * per_token / self.flops
        return max(memory, compute) * self.efficiency.decode_scale

    def prefill(self, tokens: float) -> float:
        """Seconds to read a prompt of ``tokens`` into the KV cache."""
        flops = 2 * self.active_params * tokens
        flops += self.attention_flops * tokens * tokens / 2
        memory = self.weights.total / self.bandwidth
        return max(flops / self.flops, memory) * self.efficiency.prefill_scale
