"""A model's shape, read from a Hugging Face ``config.json``, and the parameters it implies.

Parameters are counted by group (embedding, output head, attention, MLP, routed experts,
norms and biases) because precisions treat groups differently: AWQ/GPTQ keep the
embedding and the head in 16 bits, and a decode step reads the head but only a few rows
of the embedding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kefu.plan import PlanError

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
# Qwen2's q/k/v projections carry a bias its config does not declare.
_QKV_BIAS_TYPES = frozenset({"qwen2", "qwen2_moe"})
_QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe"})


@dataclass(frozen=True, slots=True)
class Mla:
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds one latent per token."""

    kv_lora_rank: int
    rope_head_dim: int
    nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int  # 0: queries are projected directly from the hidden state


@dataclass(frozen=True, slots=True)
class Moe:
    """Routed experts; ``dense_layers`` first layers keep a dense MLP (DeepSeek)."""

    experts: int
    experts_per_token: int
    expert_intermediate: int
    shared_intermediate: int = 0  # width of the always-on shared expert(s), 0 if none
    dense_layers: int = 0


@dataclass(frozen=True, slots=True)
class Params:
    """Parameter counts by group, for the whole model."""

    embedding: int
    head: int  # the output projection; 0 when tied to the embedding
    attention: int
    mlp: int  # dense MLPs and shared experts
    experts: int  # routed experts, all of them
    small: int  # norms, biases, routers: kept in 16 bits by every format here

    @property
    def total(self) -> int:
        return self.embedding + self.head + self.attention + self.mlp + self.experts + self.small


@dataclass(frozen=True, slots=True)
class ModelShape:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    qkv_bias: bool = False
    qk_norm: bool = False
    moe: Moe | None = None
    mla: Mla | None = None

    def __post_init__(self) -> None:
        for field in ("hidden", "layers", "heads", "kv_heads", "head_dim", "vocab"):
            if getattr(self, field) <= 0:
                raise PlanError(f"{self.name}: {field} must be positive")
        if self.heads % self.kv_heads:
            raise PlanError(
                f"{self.name}: {self.heads} attention heads do not split into "
                f"{self.kv_heads} key/value heads"
            )

    def kv_values_per_token(self) -> int:
        """Numbers the KV cache keeps per token, all layers: 2 x kv_heads x head_dim (K and
        V), or for MLA the latent plus its rotary key, shared by all heads."""
        if self.mla is not None:
            return self.layers * (self.mla.kv_lora_rank + self.mla.rope_head_dim)
        return 2 * self.layers * self.kv_heads * self.head_dim

    def attention_flops_per_context_token(self) -> int:
        """FLOPs one new token spends per token of context: QK^T and the weighted sum of V."""
        if self.mla is not None:
            qk = self.mla.nope_head_dim + self.mla.rope_head_dim
            return 2 * self.layers * self.heads * (qk + self.mla.v_head_dim)
        return 4 * self.layers * self.heads * self.head_dim

    def _attention_per_layer(self) -> tuple[int, int]:
        """(matrix parameters, small parameters) of one layer's attention."""
        h, q_width = self.hidden, self.heads * self.head_dim
        if self.mla is not None:
            m = self.mla
            qk = m.nope_head_dim + m.rope_head_dim
            if m.q_lora_rank:
                q = h * m.q_lora_rank + m.q_lora_rank * self.heads * qk
            else:
                q = h * self.heads * qk
            kv = h * (m.kv_lora_rank + m.rope_head_dim)
            kv += m.kv_lora_rank * self.heads * (m.nope_head_dim + m.v_head_dim)
            out = self.heads * m.v_head_dim * h
            return q + kv + out, m.kv_lora_rank + m.q_lora_rank
        kv_width = self.kv_heads * self.head_dim
        matrices = 2 * h * q_width + 2 * h * kv_width
        small = (q_width + 2 * kv_width if self.qkv_bias else 0) + (
            2 * self.head_dim if self.qk_norm else 0
        )
        return matrices, small

    def params(self) -> Params:
        h, L = self.hidden, self.layers
        attention, attention_small = self._attention_per_layer()
        embedding = self.vocab * h
        head = 0 if self.tied_embeddings else self.vocab * h
        small = L * (2 * h + attention_small) + h  # two norms a layer, one final
        if self.moe is None:
            mlp, experts = L * 3 * h * self.intermediate, 0
        else:
            m = self.moe
            sparse_layers = L - m.dense_layers
            mlp = m.dense_layers * 3 * h * self.intermediate
            mlp += sparse_layers * 3 * h * m.shared_intermediate
            experts = sparse_layers * m.experts * 3 * h * m.expert_intermediate
            small += sparse_layers * h * m.experts  # the router
        return Params(embedding, head, L * attention, mlp, experts, small)

    def experts_touched(self, batch: float) -> float:
        """Routed experts a decode step reads per MoE layer: with ``batch`` tokens choosing
        k of E uniformly, E x (1 - (1 - k/E)^batch) distinct experts on average."""
        if self.moe is None:
            return 0.0
        e, k = self.moe.experts, self.moe.experts_per_token
        return float(e * (1 - (1 - k / e) ** max(batch, 1.0)))

    def active_params(self) -> int:
        """Parameters one token's forward pass multiplies, the input embedding excepted."""
        p = self.params()
        active = p.total - p.embedding + (p.embedding if self.tied_embeddings else 0)
        if self.moe is not None:
            active -= p.experts
            active += round(p.experts * self.moe.experts_per_token / self.moe.experts)
        return active


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    # Multimodal configs nest the language model's fields.
    nested = config.get("text_config")
    return {**config, **nested} if isinstance(nested, dict) else config


def _int(config: dict[str, Any], key: str, source: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlanError(f"{source}: {key} must be a whole number >= 0, not {value!r}")
    return value


def _optional(config: dict[str, Any], key: str, source: str, default: int) -> int:
    return default if config.get(key) is None else _int(config, key, source)


def _moe(config: dict[str, Any], source: str, intermediate: int) -> Moe | None:
    experts_key = next(
        (k for k in ("num_local_experts", "num_experts", "n_routed_experts") if config.get(k)),
        None,
    )
    if experts_key is None:
        return None
    if config.get("num_experts_per_tok") is None:
        raise PlanError(f"{source}: {experts_key} is set but num_experts_per_tok is missing")
    expert_intermediate = _optional(config, "moe_intermediate_size", source, intermediate)
    shared = _optional(config, "shared_expert_intermediate_size", source, 0)
    shared += _optional(config, "n_shared_experts", source, 0) * expert_intermediate
    return Moe(
        experts=_int(config, experts_key, source),
        experts_per_token=_int(config, "num_experts_per_tok", source),
        expert_intermediate=expert_intermediate,
        shared_intermediate=shared,
        dense_layers=_optional(config, "first_k_dense_replace", source, 0),
    )


def _mla(config: dict[str, Any], source: str) -> Mla | None:
    if config.get("kv_lora_rank") is None:
        return None
    missing = [k for k in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim") if k not in config]
    if missing:
        raise PlanError(f"{source}: kv_lora_rank (MLA) is set but {', '.join(missing)} missing")
    return Mla(
        kv_lora_rank=_int(config, "kv_lora_rank", source),
        rope_head_dim=_int(config, "qk_rope_head_dim", source),
        nope_head_dim=_int(config, "qk_nope_head_dim", source),
        v_head_dim=_int(config, "v_head_dim", source),
        q_lora_rank=_optional(config, "q_lora_rank", source, 0),
    )


def shape_from_config(config: dict[str, Any], name: str) -> ModelShape:
    """A shape from a config.json's fields; a missing or malformed field is a PlanError."""
    config = _text_config(config)
    missing = [key for key in REQUIRED if key not in config]
    if "intermediate_size" not in config and "moe_intermediate_size" not in config:
        missing.append("intermediate_size")
    if missing:
        raise PlanError(f"{name}: missing {', '.join(missing)} (a transformer's config.json?)")
    heads = _int(config, "num_attention_heads", name)
    hidden = _int(config, "hidden_size", name)
    if heads == 0:
        raise PlanError(f"{name}: num_attention_heads must be positive")
    intermediate = _optional(config, "intermediate_size", name, 0)
    model_type = str(config.get("model_type", ""))
    return ModelShape(
        name=name,
        hidden=hidden,
        layers=_int(config, "num_hidden_layers", name),
        heads=heads,
        kv_heads=_optional(config, "num_key_value_heads", name, heads),
        head_dim=_optional(config, "head_dim", name, hidden // heads),
        intermediate=intermediate,
        vocab=_int(config, "vocab_size", name),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=bool(config.get("attention_bias", model_type in _QKV_BIAS_TYPES)),
        qk_norm=model_type in _QK_NORM_TYPES,
        moe=_moe(config, name, intermediate),
        mla=_mla(config, name),
    )


def read_config(path: Path) -> ModelShape:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path}: not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise PlanError(f"{path}: a config.json is a JSON object")
    return shape_from_config(config, path.name if path.name != "config.json" else str(path))
