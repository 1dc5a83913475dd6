"""What one replica tells the others (with --redis): knowledge-base changes and newly
cached answers. The shared implementation is ``kefu.shared.changes``; without Redis
there is nobody to tell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry


class Replication(Protocol):
    async def kb_added(self, entries: Sequence[KbEntry]) -> None: ...

    async def kb_removed(self, ids: Sequence[str]) -> None: ...

    async def answer_cached(
        self, scope: str, question: str, answer: str, vector: Vectors, sources: Sequence[str]
    ) -> None: ...
