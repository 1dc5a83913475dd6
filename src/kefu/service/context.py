"""The context builder: persona + last turns + the new message, fitted to a token budget.

Tokens are counted with the engine's own tokenizer and chat template, so the
budget is exact. The oldest turn goes first; persona and message are never cut:
if they alone do not fit, the request fails with ContextLengthExceeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kefu.engine.base import ChatMessage, Tokenizer
from kefu.errors import ContextLengthExceeded


@dataclass(frozen=True, slots=True)
class BuiltContext:
    messages: list[ChatMessage]
    prompt_tokens: int
    turns_used: int
    turns_dropped: int


def build_context(
    *,
    persona: str,
    history: Sequence[ChatMessage],
    message: str,
    tokenizer: Tokenizer,
    budget: int,
) -> BuiltContext:
    """Fit ``persona + history + message`` into ``budget`` prompt tokens.

    ``history`` alternates user/assistant, oldest first; whole turns are dropped.
    """
    system = ChatMessage("system", persona)
    user = ChatMessage("user", message)
    turns = [list(history[i : i + 2]) for i in range(0, len(history), 2)]
    dropped = 0
    while True:
        messages = [system, *(m for turn in turns for m in turn), user]
        tokens = tokenizer.count_chat_tokens(messages)
        if tokens <= budget:
            return BuiltContext(messages, tokens, len(turns), dropped)
        if not turns:
            raise ContextLengthExceeded(
                f"the message is too long: with the persona it needs {tokens} prompt tokens, "
                f"and at most {budget} fit (the reply needs room too); shorten the message",
                param="message",
            )
        turns.pop(0)
        dropped += 1
