"""A GGUF model loaded through llama.cpp's C API: weights, vocabulary, chat template.

The model object is read-only after loading, so tokenising on the event loop
while the engine thread decodes is safe.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from kefu.engine.base import ChatMessage
from kefu.engine.bundled import ModelLoadError

# llama.cpp logs through this logger; below ERROR it floods stderr at every load.
logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)

# Tokens the tokenizer's memo keeps (~36 B each as a tuple of ints: ~1 MiB). Bounded by
# tokens, not prompts: 256 prompts of a long conversation are ~20 MiB, and a count of
# prompts keeps growing in memory as conversations lengthen.
TOKEN_MEMO_TOKENS = 32_768

# ChatML, for GGUF files that carry no template of their own.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TokenMemo:
    """The most recently tokenised texts, at most ``budget`` tokens in all, safe from any
    thread. A request's prompt is tokenised twice (counted at admission, then read by the
    engine), and the engine's warm-up renders the same prefix again."""

    def __init__(self, tokenize: Callable[[str], tuple[int, ...]], budget: int) -> None:
        self._tokenize = tokenize
        self.budget = budget
        self.tokens = 0
        self._entries: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> tuple[int, ...]:
        with self._lock:
            tokens = self._entries.get(text)
            if tokens is not None:
                self._entries.move_to_end(text)
                return tokens
        tokens = self._tokenize(text)
        if len(tokens) > self.budget:
            return tokens
        with self._lock:
            if text not in self._entries:
                self._entries[text] = tokens
                self.tokens += len(tokens)
            while self.tokens > self.budget:
                _, dropped = self._entries.popitem(last=False)
                self.tokens -= len(dropped)
        return tokens

    def __len__(self) -> int:
        return len(self._entries)


class LlamaModel:
    """Weights + vocabulary. ``tokenize`` and ``render_chat`` are safe from any thread."""

    def __init__(self, path: Path, *, vocab_only: bool = False) -> None:
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = vocab_only  # a tokenizer only (--tokenizer for remote engines)
        # AMX repacking crashes (SIGSEGV in ggml_backend_amx_mul_mat) in this kind of VM;
        # this is llama.cpp's --no-repack.
        params.use_extra_bufts = False
        self.path = path
        self.ptr = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self.ptr:
            raise ModelLoadError(f"llama.cpp could not load {path}: not a GGUF model?")
        self.vocab = llama_cpp.llama_model_get_vocab(self.ptr)
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(self.ptr))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self._formatter = Jinja2ChatFormatter(
            template=self.metadata("tokenizer.chat_template") or FALLBACK_TEMPLATE,
            eos_token=self._token_text(llama_cpp.llama_vocab_eos(self.vocab)),
            bos_token=self._token_text(llama_cpp.llama_vocab_bos(self.vocab)),
        )
        self.tokenize = TokenMemo(self._tokenize, TOKEN_MEMO_TOKENS)

    @property
    def model_id(self) -> str:
        return self.path.name.removesuffix(".gguf")

    def close(self) -> None:
        if self.ptr:
            llama_cpp.llama_model_free(self.ptr)
            self.ptr = None

    def metadata(self, key: str) -> str | None:
        size = 65536
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_model_meta_val_str(self.ptr, key.encode(), buf, size)
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return bytes(llama_cpp.llama_vocab_get_text(self.vocab, token)).decode(errors="replace")

    def render_chat(self, messages: Sequence[ChatMessage]) -> str:
        payload: Any = [{"role": m.role, "content": m.content} for m in messages]
        return str(self._formatter(messages=payload).prompt)

    def renders_system_between_turns(self) -> bool:
        """Whether the chat template renders a system message between turns, in its place
        (ChatML and Llama 3's do; Mistral's and Gemma's raise)."""
        probe = [
            ChatMessage("system", "kefu-probe-first"),
            ChatMessage("user", "kefu-probe-1"),
            ChatMessage("assistant", "kefu-probe-2"),
            ChatMessage("system", "kefu-probe-between"),
            ChatMessage("user", "kefu-probe-3"),
        ]
        try:
            text = self.render_chat(probe)
        except Exception:  # a template's raise_exception: it does not take one there
            return False
        between = text.find("kefu-probe-between")
        return text.find("kefu-probe-2") < between < text.find("kefu-probe-3")

    def _tokenize(self, text: str) -> tuple[int, ...]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        tokens = (llama_cpp.llama_token * capacity)()
        # parse_special=True: the template's <|im_start|> markers are single tokens.
        n = llama_cpp.llama_tokenize(
            self.vocab, data, len(data), tokens, capacity, self.add_bos, True
        )
        if n < 0:
            raise ModelLoadError(f"tokenizer needed {-n} slots, had {capacity}")
        return tuple(tokens[:n])

    def chat_tokens(self, messages: Sequence[ChatMessage]) -> tuple[int, ...]:
        return self.tokenize(self.render_chat(messages))

    def token_bytes(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
        return buf.raw[:n]

    def is_end_of_generation(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))
