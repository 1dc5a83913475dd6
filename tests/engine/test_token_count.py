"""--tokenizer: a GGUF's vocabulary alone counts a prompt as the model serving it would."""

from __future__ import annotations

import pytest

from kefu.engine.base import ChatMessage
from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.model import LlamaModel
from kefu.engine.token_count import EstimatedCount, GgufCount

pytestmark = pytest.mark.model

MESSAGES = [
    ChatMessage("system", "You are a concise customer-service assistant."),
    ChatMessage("user", "Where is my parcel LH-100234? 我的包裹在哪里？"),
]


def test_vocabulary_only_counts_exactly_what_the_full_model_would() -> None:
    counter = GgufCount(bundled_model_path())
    full = LlamaModel(bundled_model_path())
    try:
        exact = len(full.chat_tokens(MESSAGES))
        assert counter.count_chat_tokens(MESSAGES) == exact
        assert "exact" in counter.describe
        # On English the estimate errs towards more tokens, so budgets trim rather than
        # overflow (a byte-level vocabulary like this one spends several on a CJK character).
        english = [*MESSAGES[:1], ChatMessage("user", "Where is my parcel? It is late.")]
        assert EstimatedCount().count_chat_tokens(english) >= len(full.chat_tokens(english))
    finally:
        counter.close()
        full.close()
