"""Wire models of the knowledge-base admin API: ``/kb``."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from kefu.api.protocol import NoNul
from kefu.knowledge.base import Hit, KbChange
from kefu.knowledge.entries import KbEntry

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), *NoNul]


class EntryIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    question: Text
    answer: Text
    category: Annotated[str, StringConstraints(max_length=128), *NoNul] | None = None


class EntryOut(BaseModel):
    id: str
    question: str
    answer: str
    category: str | None
    lang: str
    kind: str
    source: str
    updated_at: float

    @classmethod
    def of(cls, entry: KbEntry) -> EntryOut:
        return cls(**dataclasses.asdict(entry))


class EntriesOut(BaseModel):
    count: int
    entries: list[EntryOut]


class HitOut(EntryOut):
    score: float
    lexical: float
    dense: float

    @classmethod
    def of_hit(cls, hit: Hit) -> HitOut:
        return cls(
            **dataclasses.asdict(hit.entry),
            score=round(hit.score, 4),
            lexical=round(hit.lexical, 4),
            dense=round(hit.dense, 4),
        )


class HitsOut(BaseModel):
    query: str
    hits: list[HitOut]


class ChangeOut(BaseModel):
    added: int
    updated: int
    removed: int
    total: int  # entries in the knowledge base after the change

    @classmethod
    def of(cls, change: KbChange, total: int) -> ChangeOut:
        return cls(
            added=len(change.added),
            updated=len(change.updated),
            removed=len(change.removed),
            total=total,
        )
