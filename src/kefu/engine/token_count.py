"""Counting prompt tokens for remote engines: a local GGUF vocabulary, the engine's own
``/tokenize``, or an estimate, best first. ``describe`` is what ``/ready`` shows.

The context builder counts on kefu's prompt threads, so these are synchronous.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import httpx

from kefu.engine.base import ChatMessage

log = logging.getLogger("kefu.engine")

# What a chat template adds around each message (role markers, separators), and the
# assistant's opening: about what ChatML and Llama-3 templates add.
TEMPLATE_TOKENS_PER_MESSAGE = 4
REPLY_PRIMER_TOKENS = 3
# Bytes per token for the estimate: BPE vocabularies average 3.5-4.5 bytes per token on
# English and ~3 (one CJK character) on Chinese in models trained on it; 3 errs towards
# counting too many on English, which trims context rather than overflowing the window.
# A byte-level vocabulary without Chinese (SmolLM2's) spends several tokens on a CJK
# character, which this undercounts: give such a model --tokenizer.
BYTES_PER_TOKEN = 3.0


class TokenCounter(Protocol):
    describe: str

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int: ...

    def close(self) -> None: ...


class EstimatedCount:
    describe = "estimate (about 3 bytes a token)"

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        text = sum(math.ceil(len(m.content.encode()) / BYTES_PER_TOKEN) for m in messages)
        return text + TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + REPLY_PRIMER_TOKENS

    def close(self) -> None:
        pass


class GgufCount:
    """The model's own vocabulary and chat template (weights are not loaded): exact."""

    def __init__(self, path: Path) -> None:
        from kefu.engine.llamacpp.model import LlamaModel  # loads the llama.cpp library

        self.model = LlamaModel(path, vocab_only=True)
        self.describe = f"exact: the vocabulary of {path.name} (--tokenizer)"

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return len(self.model.chat_tokens(messages))

    def close(self) -> None:
        self.model.close()


class UpstreamCount:
    """An engine's tokenize endpoint on the messages' text, plus the template's tokens.

    vLLM, SGLang and llama-server answer ``POST /tokenize``; llama-cpp-python's server
    ``POST /extras/tokenize/count``. One request per count, on a prompt thread. A failed
    request falls back to the estimate for that count.
    """

    def __init__(self, root: str, path: str, model: str | None, headers: dict[str, str]) -> None:
        self.client = httpx.Client(base_url=root, headers=headers, timeout=5.0)
        self.path = path
        self.model = model
        self.fallback = EstimatedCount()
        self.describe = f"upstream {root}{path} (+{TEMPLATE_TOKENS_PER_MESSAGE} per message)"

    def count_text(self, text: str) -> int:
        body: dict[str, str] = {"prompt": text, "content": text, "input": text}
        if self.model:
            body["model"] = self.model
        response = self.client.post(self.path, json=body)
        response.raise_for_status()
        data = response.json()
        if "count" in data:
            return int(data["count"])
        return len(data["tokens"])

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        text = "\n".join(f"{m.role}\n{m.content}" for m in messages)
        try:
            tokens = self.count_text(text)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            log.warning("counting tokens at %s failed (%s); estimated", self.path, exc)
            return self.fallback.count_chat_tokens(messages)
        return tokens + TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + REPLY_PRIMER_TOKENS

    def close(self) -> None:
        self.client.close()


TOKENIZE_PATHS = ("/tokenize", "/extras/tokenize/count")


def probe_upstream(root: str, model: str | None, headers: dict[str, str]) -> UpstreamCount | None:
    """The first tokenize endpoint the engine answers, or None."""
    for path in TOKENIZE_PATHS:
        counter = UpstreamCount(root, path, model, headers)
        try:
            if counter.count_text("hello") > 0:
                return counter
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            pass
        counter.close()
    return None
