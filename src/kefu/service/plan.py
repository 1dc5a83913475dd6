"""What the fast path decides for a message: a ``Plan``, and the passages it hands the LLM."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kefu.fastpath.router import Routing
from kefu.knowledge.base import Hit
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry, answer_key

Tier = Literal["cache", "faq", "tool", "handoff", "smalltalk", "llm"]
# Passages below this fused score are noise in the LLM's context, not help.
PASSAGE_FLOOR = 0.3


@dataclass(frozen=True, slots=True)
class Source:
    kind: Literal["kb", "cache"]
    id: str
    question: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What to answer with: ``reply`` is set when the fast path answers by itself."""

    routing: Routing
    lang: str
    tier: Tier = "llm"
    reply: str | None = None
    source: Source | None = None
    passages: tuple[Hit, ...] = ()
    vector: Vectors | None = None  # the message's embedding, to cache the LLM's answer
    # The looks' candidates the decision declined: a judge may be asked about them.
    declined: tuple[KbEntry, ...] = ()


def best_passages(hits: Sequence[Hit], limit: int) -> tuple[Hit, ...]:
    """The best hit of each answer, best first, up to ``limit``: three phrasings
    of one answer would put its text in the prompt three times (prefill the LLM
    pays for before its first token) and leave the runner-up answer out."""
    chosen: dict[str, Hit] = {}
    for hit in hits:
        if hit.score < PASSAGE_FLOOR or len(chosen) == limit:
            break
        chosen.setdefault(answer_key(hit.entry.answer), hit)
    return tuple(chosen.values())
