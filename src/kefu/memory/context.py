"""The context builder: persona + knowledge + last turns + the new message, fitted to a budget.

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


def system_prompt(persona: str, knowledge: Sequence[tuple[str, str]], memory: str = "") -> str:
    """The persona first, unchanged, so its KV prefix is shared by every conversation; then
    the session's memory, which changes once every few turns, so the conversation's KV is
    reused in between; the knowledge entries, chosen per message, last."""
    if memory:
        persona = f"{persona}\n\n{memory}"
    if not knowledge:
        return persona
    entries = "\n\n".join(f"Q: {question}\nA: {answer}" for question, answer in knowledge)
    return (
        f"{persona}\n\nThe shop's knowledge base has these entries; answer from them when "
        f"they apply, and never invent policies they do not state:\n\n{entries}"
    )


def build_context(
    *,
    persona: str,
    history: Sequence[Sequence[ChatMessage]],
    message: str,
    tokenizer: Tokenizer,
    budget: int,
    knowledge: Sequence[tuple[str, str]] = (),
    memory: str = "",
) -> BuiltContext:
    """Fit ``persona + knowledge + history + message`` into ``budget`` prompt tokens.

    ``history`` is whole turns, oldest first; the oldest turn goes first, then the
    knowledge entries (least relevant first), never the persona or the message.
    ``memory`` (the summary and facts of older turns) stays: it is what is left of them.
    """
    user = ChatMessage("user", message)
    turns = [list(turn) for turn in history]
    kept = list(knowledge)
    dropped = 0
    while True:
        system = ChatMessage("system", system_prompt(persona, kept, memory))
        messages = [system, *(m for turn in turns for m in turn), user]
        tokens = tokenizer.count_chat_tokens(messages)
        if tokens <= budget:
            return BuiltContext(messages, tokens, len(turns), dropped)
        if turns:
            turns.pop(0)
            dropped += 1
            continue
        if kept:
            kept.pop()
            continue
        if memory:
            memory = ""
            continue
        raise ContextLengthExceeded(
            f"the message is too long: with the persona it needs {tokens} prompt tokens, "
            f"and at most {budget} fit (the reply needs room too); shorten the message",
            param="message",
        )
