"""Shapes and sizes against values computed by hand from the published configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kefu.plan import PlanError
from kefu.plan.catalog import CONFIGS, builtin, require_builtin
from kefu.plan.model import read_config, shape_from_config
from kefu.plan.precision import kv_bytes, precision

# Mistral-7B-v0.1's config.json: a "7B" with a small vocabulary.
MISTRAL_7B = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}


def test_llama_31_8b_kv_is_131072_bytes_a_token_in_bf16() -> None:
    shape = require_builtin("Llama-3.1-8B-Instruct")
    assert (shape.layers, shape.kv_heads, shape.head_dim) == (32, 8, 128)
    # 2 (K and V) x 32 layers x 8 KV heads x 128 x 2 bytes
    assert shape.kv_values_per_token() * kv_bytes("bf16") == 2 * 32 * 8 * 128 * 2 == 131_072


def test_an_8b_model_in_bf16_is_about_16_gb() -> None:
    shape = require_builtin("meta-llama/Llama-3.1-8B-Instruct")
    # Embedding and head 2 x 128256 x 4096 = 1 050 673 152; a layer: q, o 2 x 4096^2,
    # k, v 2 x 4096 x 1024, MLP 3 x 4096 x 14336, norms 2 x 4096 = 218 112 000; x 32;
    # final norm 4096: 8 030 261 248 parameters.
    assert shape.params().total == 8_030_261_248
    weights = precision("bf16").weight_bytes(shape.params()).total
    assert weights == 2 * 8_030_261_248
    assert weights / 1e9 == pytest.approx(16.06, abs=0.01)


def test_a_7b_model_in_4_bit_is_about_4_gb() -> None:
    shape = shape_from_config(MISTRAL_7B, "mistral-7b")
    params = shape.params()
    assert params.total / 1e9 == pytest.approx(7.24, abs=0.01)
    weights = precision("int4").weight_bytes(params).total
    # 6.98 B matrix weights x 4.156 bits / 8 + 0.262 B embedding and head x 2 bytes
    assert weights / 1e9 == pytest.approx(4.15, abs=0.02)
    assert 3.5e9 < weights < 4.5e9


def test_qwen25_7b_counts_its_qkv_bias_and_untied_head() -> None:
    shape = require_builtin("qwen2.5-7b-instruct")
    p = shape.params()
    # A layer: q, o 2 x 3584^2 + k, v 2 x 3584 x 512 = 29 360 128; bias 3584 + 2 x 512;
    # MLP 3 x 3584 x 18944 = 203 685 888; norms 2 x 3584.
    layer = 29_360_128 + 4_608 + 203_685_888 + 7_168
    assert p.total == 28 * layer + 2 * 152_064 * 3584 + 3584 == 7_615_616_512
    assert shape.kv_values_per_token() * 2 == 2 * 28 * 4 * 128 * 2 == 57_344


def test_moe_counts_all_experts_in_memory_and_the_chosen_ones_per_token() -> None:
    mixtral = require_builtin("Mixtral-8x7B-Instruct-v0.1")
    assert mixtral.params().total / 1e9 == pytest.approx(46.70, abs=0.01)
    # Two of eight experts a token; the published "12.9 B active" counts the embedding.
    active_with_embedding = mixtral.active_params() + mixtral.params().embedding
    assert active_with_embedding / 1e9 == pytest.approx(12.88, abs=0.01)
    assert mixtral.experts_touched(1) == pytest.approx(2)
    assert mixtral.experts_touched(64) == pytest.approx(8, abs=1e-3)


def test_mla_caches_one_latent_a_token() -> None:
    lite = require_builtin("DeepSeek-V2-Lite-Chat")
    # 27 layers x (512 latent + 64 rotary key), shared by the 16 heads
    assert lite.kv_values_per_token() == 27 * (512 + 64)
    assert lite.params().total / 1e9 == pytest.approx(15.7, abs=0.05)
    assert lite.active_params() / 1e9 == pytest.approx(2.45, abs=0.05)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_builtin_model_has_a_sane_shape(name: str) -> None:
    shape = builtin(name)
    assert shape is not None
    assert 0.4e9 < shape.params().total < 80e9
    assert shape.active_params() <= shape.params().total


def test_gguf_block_types_count_their_scales() -> None:
    assert precision("q4_0").bits == 4.5  # 32 weights in 18 bytes
    assert precision("q8_0").bits == 8.5
    assert precision("Q4_K").bits == 4.5
    assert precision("q6_k").bits == 6.5625


def test_a_config_missing_fields_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 4096, "vocab_size": 32000}))
    with pytest.raises(PlanError, match="missing num_hidden_layers, num_attention_heads"):
        read_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({**MISTRAL_7B, "num_hidden_layers": "32"}), "whole number"),
        (json.dumps({**MISTRAL_7B, "num_key_value_heads": 5}), "do not split"),
        (json.dumps({**MISTRAL_7B, "num_local_experts": 8}), "num_experts_per_tok"),
    ],
)
def test_malformed_configs_are_plan_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(PlanError, match=message):
        read_config(path)


def test_unknown_names_list_the_built_in_ones() -> None:
    with pytest.raises(PlanError, match=r"no model 'gpt-5'.*Qwen2\.5-7B-Instruct"):
        require_builtin("gpt-5")
    with pytest.raises(PlanError, match="unknown precision"):
        precision("int3")
