"""A GGUF file's shape (from its metadata) and its weights' real size (from its tensors).

The size is the sum of the tensors' stored bytes, so a Q4_K_M file's mix of Q4_K, Q6_K
and F32 tensors counts as what it is, with no assumed bits per weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf

from kefu.plan import PlanError
from kefu.plan.model import Mla, ModelShape, Moe
from kefu.plan.precision import WeightBytes


@dataclass(frozen=True, slots=True)
class GgufModel:
    shape: ModelShape
    weights: WeightBytes
    file_type: str  # the types of the big tensors, e.g. "Q4_1 + Q8_0"
    bits_per_weight: float


def _reader(path: Path) -> gguf.GGUFReader:
    if not path.is_file():
        raise PlanError(f"{path}: no such file")
    try:
        return gguf.GGUFReader(path)
    except Exception as exc:  # the reader raises assorted errors on a file that is not GGUF
        raise PlanError(f"{path}: not a GGUF model file ({exc})") from None


def _fields(reader: gguf.GGUFReader) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key != "tokenizer.ggml.model":
            values[key] = len(field.data)  # token lists: only their length matters here
            continue
        values[key] = field.contents()
    return values


def _widest(value: Any) -> int:
    # Some architectures give a per-layer list (head counts, FFN widths).
    return int(max(value)) if isinstance(value, list) else int(value)


def read_gguf(path: Path) -> GgufModel:
    reader = _reader(path)
    meta = _fields(reader)
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise PlanError(f"{path}: GGUF without general.architecture: not a model")

    def get(key: str, default: int | None = None) -> int:
        value = meta.get(f"{arch}.{key}")
        if value is None:
            if default is None:
                raise PlanError(f"{path}: GGUF metadata lacks {arch}.{key}")
            return default
        return _widest(value)

    hidden, heads = get("embedding_length"), get("attention.head_count")
    vocab = get("vocab_size", meta.get("tokenizer.ggml.tokens", 0))
    experts = get("expert_count", 0)
    moe = None
    if experts:
        moe = Moe(
            experts=experts,
            experts_per_token=get("expert_used_count"),
            expert_intermediate=get("expert_feed_forward_length", get("feed_forward_length")),
            shared_intermediate=get("expert_shared_count", 0)
            * get("expert_feed_forward_length", 0),
            dense_layers=get("leading_dense_block_count", 0),
        )
    head_dim = get("attention.key_length", hidden // max(heads, 1))
    mla = None
    if get("attention.kv_lora_rank", 0):
        rope = get("rope.dimension_count")
        mla = Mla(
            kv_lora_rank=get("attention.kv_lora_rank"),
            rope_head_dim=rope,
            nope_head_dim=head_dim - rope,
            v_head_dim=get("attention.value_length", head_dim - rope),
            q_lora_rank=get("attention.q_lora_rank", 0),
        )
    names = {t.name for t in reader.tensors}
    shape = ModelShape(
        name=path.name,
        hidden=hidden,
        layers=get("block_count"),
        heads=heads,
        kv_heads=get("attention.head_count_kv", heads),
        head_dim=head_dim,
        intermediate=get("feed_forward_length", 0),
        vocab=vocab,
        tied_embeddings="output.weight" not in names,
        moe=moe,
        mla=mla,
    )
    groups = {"embedding": 0.0, "head": 0.0, "dense": 0.0, "experts": 0.0}
    big_types: set[str] = set()
    for tensor in reader.tensors:
        if tensor.name == "token_embd.weight":
            group = "embedding"
        elif tensor.name == "output.weight":
            group = "head"
        else:
            group = "experts" if "_exps" in tensor.name else "dense"
        groups[group] += int(tensor.n_bytes)
        if len(tensor.shape) > 1:
            big_types.add(tensor.tensor_type.name)
    elements = sum(int(t.n_elements) for t in reader.tensors)
    weights = WeightBytes(**groups)
    return GgufModel(
        shape=shape,
        weights=weights,
        file_type=" + ".join(sorted(big_types)),
        bits_per_weight=weights.total * 8 / max(elements, 1),
    )
