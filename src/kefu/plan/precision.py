"""Weight precisions and KV-cache types, in bits per stored number, scales included.

GGUF block types take their size from the ``gguf`` package's own table (bytes per block
of weights), so a Q4_K is the 4.5 bits llama.cpp really stores, not "4 bits".
"""

from __future__ import annotations

from dataclasses import dataclass

import gguf

from kefu.plan import PlanError
from kefu.plan.model import Params

# AWQ and GPTQ at group size 128: a 4-bit weight plus, per group, a 16-bit scale and a
# 4-bit zero point.
INT4_GROUP_BITS = 4 + (16 + 4) / 128


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """Bytes of weights by how a decode step reads them."""

    embedding: float  # a step reads a few rows, unless it is also the (tied) head
    head: float  # 0 when tied to the embedding
    dense: float  # attention, dense MLPs, shared experts, norms: read whole every step
    experts: float  # routed experts: a step reads those its tokens were routed to

    @property
    def total(self) -> float:
        return self.embedding + self.head + self.dense + self.experts


@dataclass(frozen=True, slots=True)
class Precision:
    name: str
    bits: float  # per quantized weight
    quantizes_embeddings: bool  # GGUF quantizes the embedding and head; AWQ/GPTQ/FP8 do not
    about: str

    def weight_bytes(self, params: Params) -> WeightBytes:
        edge = (self.bits if self.quantizes_embeddings else 16) / 8
        return WeightBytes(
            embedding=params.embedding * edge,
            head=params.head * edge,
            dense=(params.attention + params.mlp) * self.bits / 8 + params.small * 2,
            experts=params.experts * self.bits / 8,
        )


def _gguf_bits(kind: gguf.GGMLQuantizationType) -> float:
    block, size = gguf.GGML_QUANT_SIZES[kind]
    return size * 8 / block


_GGUF_TYPES = ("Q8_0", "Q6_K", "Q5_K", "Q5_1", "Q5_0", "Q4_K", "Q4_1", "Q4_0", "Q3_K", "Q2_K")

PRECISIONS: dict[str, Precision] = {
    "bf16": Precision("bf16", 16, False, "bfloat16, as published"),
    "fp16": Precision("fp16", 16, False, "float16"),
    "fp8": Precision("fp8", 8, False, "FP8 weights, per-channel scales (embedding, head 16-bit)"),
    "int8": Precision("int8", 8, False, "W8A8 / GPTQ-int8 (embedding, head 16-bit)"),
    "int4": Precision(
        "int4",
        INT4_GROUP_BITS,
        False,
        "AWQ/GPTQ 4-bit, group 128: 4 bits + 16-bit scale + 4-bit zero per 128 "
        "(embedding, head 16-bit)",
    ),
    **{
        t.lower(): Precision(
            t.lower(),
            _gguf_bits(gguf.GGMLQuantizationType[t]),
            True,
            f"GGUF {t}: {_gguf_bits(gguf.GGMLQuantizationType[t]):g} bits a weight, every matrix",
        )
        for t in _GGUF_TYPES
    },
}
PRECISIONS["awq"] = PRECISIONS["gptq"] = PRECISIONS["int4"]

# Bytes per cached number. llama.cpp's q8_0/q4_0 caches carry a 16-bit scale per 32.
KV_TYPES: dict[str, float] = {
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "q8_0": _gguf_bits(gguf.GGMLQuantizationType.Q8_0) / 8,
    "q4_0": _gguf_bits(gguf.GGMLQuantizationType.Q4_0) / 8,
}


def precision(name: str) -> Precision:
    try:
        return PRECISIONS[name.lower()]
    except KeyError:
        raise PlanError(
            f"unknown precision {name!r}; one of {', '.join(sorted(PRECISIONS))}"
        ) from None


def kv_bytes(name: str) -> float:
    try:
        return KV_TYPES[name.lower()]
    except KeyError:
        raise PlanError(f"unknown KV type {name!r}; one of {', '.join(KV_TYPES)}") from None
