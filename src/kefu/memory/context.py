"""The context builder: persona + memory + last turns + the new message with its knowledge,
fitted to a budget.

Tokens are counted with the engine's own tokenizer and chat template, so the
budget is exact. The oldest turn goes first; persona and message are never cut:
if they alone do not fit, the request fails with ContextLengthExceeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kefu.engine.base import ChatMessage, Tokenizer
from kefu.errors import ContextLengthExceeded

KNOWLEDGE_INTRO = (
    "The shop's knowledge base has these entries; answer from them when they apply, and "
    "never invent policies they do not state:"
)

Knowledge = Sequence[tuple[str, str]]


class KeptTurns(NamedTuple):
    """The turns a prompt holds, oldest first: as the model read them (with the knowledge
    they were sent with), and the same turns without it (``build_context``'s fallback)."""

    sent: list[list[ChatMessage]]
    plain: list[list[ChatMessage]]


@dataclass(frozen=True, slots=True)
class BuiltContext:
    messages: list[ChatMessage]
    prompt_tokens: int
    turns_used: int
    turns_dropped: int
    # The entries sent with the message (those the kept turns did not already show): the
    # turn keeps them, so the next prompt repeats this message exactly as it was read.
    knowledge: tuple[tuple[str, str], ...] = ()


def system_prompt(persona: str, memory: str = "") -> str:
    """The persona first, unchanged, so its KV prefix is shared by every conversation; then
    the session's memory, which changes once every few turns, so the conversation's KV is
    reused in between."""
    return f"{persona}\n\n{memory}" if memory else persona


def entry_text(question: str, answer: str) -> str:
    return f"Q: {question}\nA: {answer}"


def with_knowledge(
    message: str, knowledge: Knowledge, *, as_system: bool = False
) -> list[ChatMessage]:
    """The customer's message as the model reads it, with the knowledge base's entries
    chosen for it: a system message of them just before it (``as_system``: a template that
    takes one between turns), else in the message, ahead of its words. They travel with
    their message, not in the first system prompt: chosen per message, they would change
    the prompt right after the persona at every turn, and the engine would read the whole
    conversation again each time."""
    if not knowledge:
        return [ChatMessage("user", message)]
    entries = "\n\n".join(entry_text(question, answer) for question, answer in knowledge)
    if as_system:
        return [
            ChatMessage("system", f"{KNOWLEDGE_INTRO}\n\n{entries}"),
            ChatMessage("user", message),
        ]
    text = f"{KNOWLEDGE_INTRO}\n\n{entries}\n\nThe customer's message:\n\n{message}"
    return [ChatMessage("user", text)]


def build_context(
    *,
    persona: str,
    history: Sequence[Sequence[ChatMessage]],
    message: str,
    tokenizer: Tokenizer,
    budget: int,
    knowledge: Knowledge = (),
    memory: str = "",
    plain_history: Sequence[Sequence[ChatMessage]] | None = None,
    knowledge_as_system: bool = False,
) -> BuiltContext:
    """Fit ``persona + memory + history + knowledge + message`` into ``budget`` prompt tokens.

    ``history`` is whole turns, oldest first, as the model read them (with the knowledge
    they were sent with, where the turn keeps it); an entry a kept turn already shows is
    not sent again. Too long, the turns go without their knowledge (``plain_history``, the
    same turns), then the oldest turn goes first, then the knowledge entries (least
    relevant first), never the persona or the message. ``memory`` (the summary and facts of
    older turns) stays: it is what is left of them. ``knowledge_as_system``: see
    ``with_knowledge``.
    """
    turns = [list(turn) for turn in history]
    plain = [list(turn) for turn in plain_history] if plain_history is not None else None
    wanted = list(knowledge)
    dropped = 0
    system = ChatMessage("system", system_prompt(persona, memory))
    while True:
        shown = [m.content for turn in turns for m in turn if m.role != "assistant"]
        sent = [e for e in wanted if not any(entry_text(*e) in text for text in shown)]
        new = with_knowledge(message, sent, as_system=knowledge_as_system)
        messages = [system, *(m for turn in turns for m in turn), *new]
        tokens = tokenizer.count_chat_tokens(messages)
        if tokens <= budget:
            return BuiltContext(messages, tokens, len(turns), dropped, tuple(sent))
        if plain is not None:
            shorter = plain != turns
            turns, plain = plain, None
            if shorter:
                continue
        if turns:
            turns.pop(0)
            dropped += 1
            continue
        if wanted:
            wanted.pop()
            continue
        if memory:
            memory = ""
            system = ChatMessage("system", system_prompt(persona))
            continue
        raise ContextLengthExceeded(
            f"the message is too long: with the persona it needs {tokens} prompt tokens, "
            f"and at most {budget} fit (the reply needs room too); shorten the message",
            param="message",
        )
