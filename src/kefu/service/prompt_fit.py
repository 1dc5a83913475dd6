"""A /chat prompt fitted to what the engine can read within the TTFT SLO (--fit-to-slo).

Under load a conversation's first model turn often reads its whole history: the turns
the fast path answered never passed through the engine, and with customers waiting the
read ahead does not run. On a two-core box that is 300-600 tokens at 5-7 ms each, past a
2 s SLO with a free slot and nothing ahead, where admission must admit and the answer
comes late. Admission says how long a prompt it would expect in time
(``Admission.readable``); the prompt is built again to that many tokens fewer, by
``build_context``'s own order (the older turns' passages, the oldest turns, the least
relevant passages), never past the best passage: the persona, the memory (the facts of
older turns: order numbers, sizes), the best passage and the message stay.

Kept only where it fits: a shorter prompt that still misses the SLO would lose context for
nothing, and one whose dropped turns were the engine's cached prefix reads more, not less.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kefu.engine.base import Tokenizer, unread_tokens
from kefu.errors import ContextLengthExceeded
from kefu.memory.context import BuiltContext


@dataclass(frozen=True, slots=True)
class Fitted:
    context: BuiltContext
    unread: int  # the prompt's tokens the engine will have to read
    # Tokens the fit left unread, and what it dropped for them (0 where the prompt is whole).
    saved: int = 0
    turns: int = 0
    passages: int = 0

    def meta(self) -> dict[str, int]:
        """What the answer's meta says of the fit."""
        return {"tokens": self.saved, "turns": self.turns, "passages": self.passages}


def fit_prompt(
    build: Callable[..., BuiltContext], tokenizer: Tokenizer, readable: int | None
) -> Fitted:
    """``build()`` (a ``build_context`` with all but ``budget`` bound), and where the engine
    would read more than ``readable`` of its tokens, ``build(budget=...)`` short of the
    difference, if that reads no more than ``readable``. ``readable`` None: whole."""
    whole = build()
    unread = unread_tokens(tokenizer, whole.messages, whole.prompt_tokens)
    if readable is None or unread <= readable:
        return Fitted(whole, unread)
    try:
        shorter = build(budget=whole.prompt_tokens - (unread - readable))
    except ContextLengthExceeded:
        return Fitted(whole, unread)
    left = unread_tokens(tokenizer, shorter.messages, shorter.prompt_tokens)
    lost_memory = shorter.messages[0] != whole.messages[0]
    lost_passages = bool(whole.knowledge) and not shorter.knowledge
    if left > readable or lost_memory or lost_passages:
        return Fitted(whole, unread)
    return Fitted(
        shorter,
        left,
        saved=unread - left,
        turns=shorter.turns_dropped - whole.turns_dropped,
        passages=max(0, len(whole.knowledge) - len(shorter.knowledge)),
    )
