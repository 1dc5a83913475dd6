"""Built-in models: the fields of each model's published config.json that the planner reads.

Values are copied from the config.json files on the Hugging Face hub (org/name as the
key). A DeepSeek-R1 distill has its base model's shape. ``kefu plan --model NAME`` takes
the full key or the part after the slash, in any case.
"""

from __future__ import annotations

from typing import Any

from kefu.plan import PlanError
from kefu.plan.model import ModelShape, shape_from_config


def _dense(
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    vocab: int,
    tied: bool,
    model_type: str,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        **extra,
    }


_QWEN25_7B = _dense(3584, 28, 28, 4, 18944, 152064, False, "qwen2")
_QWEN25_14B = _dense(5120, 48, 40, 8, 13824, 152064, False, "qwen2")
_QWEN25_32B = _dense(5120, 64, 40, 8, 27648, 152064, False, "qwen2")
_LLAMA31_8B = _dense(4096, 32, 32, 8, 14336, 128256, False, "llama")
_LLAMA3_70B = _dense(8192, 80, 64, 8, 28672, 128256, False, "llama")

CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen2.5-0.5B-Instruct": _dense(896, 24, 14, 2, 4864, 151936, True, "qwen2"),
    "Qwen/Qwen2.5-1.5B-Instruct": _dense(1536, 28, 12, 2, 8960, 151936, True, "qwen2"),
    "Qwen/Qwen2.5-3B-Instruct": _dense(2048, 36, 16, 2, 11008, 151936, True, "qwen2"),
    "Qwen/Qwen2.5-7B-Instruct": _QWEN25_7B,
    "Qwen/Qwen2.5-14B-Instruct": _QWEN25_14B,
    "Qwen/Qwen2.5-32B-Instruct": _QWEN25_32B,
    "Qwen/Qwen2.5-72B-Instruct": _dense(8192, 80, 64, 8, 29568, 152064, False, "qwen2"),
    "Qwen/Qwen3-0.6B": _dense(1024, 28, 16, 8, 3072, 151936, True, "qwen3", head_dim=128),
    "Qwen/Qwen3-1.7B": _dense(2048, 28, 16, 8, 6144, 151936, True, "qwen3", head_dim=128),
    "Qwen/Qwen3-4B": _dense(2560, 36, 32, 8, 9728, 151936, True, "qwen3", head_dim=128),
    "Qwen/Qwen3-8B": _dense(4096, 36, 32, 8, 12288, 151936, False, "qwen3", head_dim=128),
    "Qwen/Qwen3-14B": _dense(5120, 40, 40, 8, 17408, 151936, False, "qwen3", head_dim=128),
    "Qwen/Qwen3-32B": _dense(5120, 64, 64, 8, 25600, 151936, False, "qwen3", head_dim=128),
    "Qwen/Qwen3-30B-A3B": _dense(
        2048,
        48,
        32,
        4,
        6144,
        151936,
        False,
        "qwen3_moe",
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
    ),
    "meta-llama/Llama-3.2-1B-Instruct": _dense(
        2048, 16, 32, 8, 8192, 128256, True, "llama", head_dim=64
    ),
    "meta-llama/Llama-3.2-3B-Instruct": _dense(
        3072, 28, 24, 8, 8192, 128256, True, "llama", head_dim=128
    ),
    "meta-llama/Llama-3.1-8B-Instruct": _LLAMA31_8B,
    "meta-llama/Llama-3.1-70B-Instruct": _LLAMA3_70B,
    "meta-llama/Llama-3.3-70B-Instruct": _LLAMA3_70B,
    "THUDM/glm-4-9b-chat-hf": _dense(
        4096, 40, 32, 2, 13696, 151552, False, "glm", head_dim=128, attention_bias=True
    ),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": _QWEN25_7B,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": _QWEN25_14B,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": _QWEN25_32B,
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": _LLAMA31_8B,
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": _LLAMA3_70B,
    "mistralai/Mixtral-8x7B-Instruct-v0.1": _dense(
        4096,
        32,
        32,
        8,
        14336,
        32000,
        False,
        "mixtral",
        num_local_experts=8,
        num_experts_per_tok=2,
    ),
    # Multi-head latent attention: the cache holds a 512-wide latent + a 64-wide rotary key.
    "deepseek-ai/DeepSeek-V2-Lite-Chat": _dense(
        2048,
        27,
        16,
        16,
        10944,
        102400,
        False,
        "deepseek_v2",
        kv_lora_rank=512,
        q_lora_rank=None,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        n_routed_experts=64,
        n_shared_experts=2,
        num_experts_per_tok=6,
        moe_intermediate_size=1408,
        first_k_dense_replace=1,
    ),
}


def builtin(name: str) -> ModelShape | None:
    """The built-in model called ``name`` (org/name or name, any case), or None."""
    wanted = name.lower()
    for key, config in CONFIGS.items():
        if wanted in (key.lower(), key.split("/", 1)[1].lower()):
            return shape_from_config(config, key)
    return None


def require_builtin(name: str) -> ModelShape:
    shape = builtin(name)
    if shape is None:
        short = ", ".join(key.split("/", 1)[1] for key in CONFIGS)
        raise PlanError(f"no model {name!r}: give a config.json, a .gguf file or one of: {short}")
    return shape
