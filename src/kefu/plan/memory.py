"""Where a device's memory goes: weights, activations, runtime, and the KV cache's share.

Like vLLM: the budget is the device's memory x --gpu-memory-utilization; weights (split
over a tensor-parallel group) and fixed allowances come off it; the rest holds the KV
cache, reserved per sequence for its whole context in blocks of 16 tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kefu.plan.hardware import GIB, Device
from kefu.plan.precision import WeightBytes

BLOCK_TOKENS = 16  # vLLM's default KV block; llama.cpp's cells are per token
# Allowances, GiB per device. vLLM's profiled activation peak (CUDA graphs, warm-up
# buffers, allocator) is 4.8-5.6 GiB for dense models and ~7.4 for MoE on an H100
# (llm-d's measurements), constant in the context length; non-torch memory (CUDA
# context, NCCL) 0.13-0.15 GiB alone, ~0.55 under tensor parallelism. llama.cpp on a CPU
# needs a compute buffer of a few hundred MiB.
GPU_ACTIVATION_DENSE_GIB = 5.0
GPU_ACTIVATION_MOE_GIB = 8.0
GPU_RUNTIME_GIB = 0.15
GPU_RUNTIME_TP_GIB = 0.6
CPU_ACTIVATION_GIB = 0.5
TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """One replica: ``tp`` devices holding one copy of the model. Sizes in GiB per device."""

    device: Device
    tp: int
    utilization: float
    budget_gib: float
    weights_gib: float
    activation_gib: float
    runtime_gib: float
    kv_bytes_per_token: float
    context_tokens: int  # reserved per sequence

    @property
    def kv_gib(self) -> float:
        """The KV cache's share on each device."""
        return self.budget_gib - self.weights_gib - self.activation_gib - self.runtime_gib

    @property
    def bytes_per_sequence(self) -> float:
        block = BLOCK_TOKENS if self.device.is_gpu else 1
        return math.ceil(self.context_tokens / block) * block * self.kv_bytes_per_token

    @property
    def sequences(self) -> int:
        """Sequences of ``context_tokens`` whose KV fits the replica at once."""
        if self.kv_gib <= 0:
            return 0
        return int(self.kv_gib * self.tp * GIB // self.bytes_per_sequence)


def plan_memory(
    device: Device,
    weights: WeightBytes,
    kv_bytes_per_token: float,
    context_tokens: int,
    *,
    utilization: float,
    activation_gib: float | None,
    moe: bool,
    tp: int = 1,
) -> MemoryPlan:
    if activation_gib is None:
        if device.is_gpu:
            activation_gib = GPU_ACTIVATION_MOE_GIB if moe else GPU_ACTIVATION_DENSE_GIB
        else:
            activation_gib = CPU_ACTIVATION_GIB
    runtime = GPU_RUNTIME_GIB if tp == 1 else GPU_RUNTIME_TP_GIB
    if not device.is_gpu:
        runtime = 0.0
    return MemoryPlan(
        device=device,
        tp=tp,
        utilization=utilization,
        budget_gib=device.memory_gib * utilization,
        weights_gib=weights.total / GIB / tp,
        activation_gib=activation_gib,
        runtime_gib=runtime,
        kv_bytes_per_token=kv_bytes_per_token,
        context_tokens=context_tokens,
    )


def fitting_groups(
    device: Device,
    weights: WeightBytes,
    kv_bytes_per_token: float,
    context_tokens: int,
    *,
    utilization: float,
    activation_gib: float | None,
    moe: bool,
) -> list[MemoryPlan]:
    """The tensor-parallel groups (1, 2, 4, 8 devices; a CPU is one) that hold the weights
    and at least one sequence's KV, smallest first."""
    plans = [
        plan_memory(
            device,
            weights,
            kv_bytes_per_token,
            context_tokens,
            utilization=utilization,
            activation_gib=activation_gib,
            moe=moe,
            tp=tp,
        )
        for tp in (TP_SIZES if device.is_gpu else (1,))
    ]
    return [plan for plan in plans if plan.sequences >= 1]
