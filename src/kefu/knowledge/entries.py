"""What the knowledge base holds: one FAQ pair or one passage, identified by its question.

The id is derived from the normalised question, so importing the same question
again (with a new answer) updates the entry instead of adding a twin, and the
cache can name the entries an answer came from without a lookup table.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass
from typing import Literal

from kefu.text.normalize import normalize
from kefu.text.words import language

Kind = Literal["faq", "passage"]
KINDS: tuple[Kind, ...] = ("faq", "passage")


def entry_id(question: str) -> str:
    """First 12 hex digits of sha1(normalize(question)): the same question, the same id."""
    return id_of_normal(normalize(question))


def id_of_normal(normal: str) -> str:
    """``entry_id`` of a question's ``normalize`` form (a message read once has it)."""
    return hashlib.sha1(normal.encode("utf-8")).hexdigest()[:12]


@functools.lru_cache(maxsize=8192)
def answer_key(answer: str) -> str:
    """What entries sharing an answer (phrasings of one question) have in common: the
    normalised answer. Memoised: the router groups its hits by it for every message."""
    return normalize(answer)


@dataclass(frozen=True, slots=True)
class KbEntry:
    id: str
    question: str  # for a passage: its heading
    answer: str  # for a passage: its body
    category: str | None
    lang: str  # 'en' | 'zh', text.language(question + answer)
    # Only "faq" entries may be served verbatim; passages are context for the LLM.
    kind: Kind
    source: str  # the file it was imported from ("demo" for the bundled demo)
    updated_at: float

    @classmethod
    def make(
        cls,
        question: str,
        answer: str,
        *,
        category: str | None = None,
        kind: Kind = "faq",
        source: str = "",
        updated_at: float | None = None,
    ) -> KbEntry:
        """An entry with its derived fields (id, lang) filled in; text is stripped."""
        question, answer = question.strip(), answer.strip()
        return cls(
            id=entry_id(question),
            question=question,
            answer=answer,
            category=(category or "").strip() or None,
            lang=language(question + " " + answer),
            kind=kind,
            source=source,
            updated_at=time.time() if updated_at is None else updated_at,
        )

    def same_content(self, other: KbEntry) -> bool:
        """Equal but for the time stamp: re-importing it changes nothing."""
        return (self.question, self.answer, self.category, self.kind, self.source) == (
            other.question,
            other.answer,
            other.category,
            other.kind,
            other.source,
        )
