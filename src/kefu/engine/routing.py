"""Which engine of a pool takes a request: affinity (rendezvous hashing), least load, round robin.

Rendezvous (highest-random-weight) hashing ranks the engines by a hash of (key, engine):
the same key always prefers the same engine, and when an engine leaves only the keys it
held move (to their second choice), so the other conversations keep their KV caches.
Pure functions of their inputs, so the choice is unit-tested without a network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Routing = Literal["affinity", "least-load", "round-robin"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """An engine that may take the request now, with its load (kefu's in flight plus the
    engine's own reported queue)."""

    name: str
    load: float


@dataclass(frozen=True, slots=True)
class Choice:
    name: str
    reason: str


def rendezvous_score(key: str, name: str) -> int:
    digest = hashlib.blake2b(f"{key}\x00{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def choose(
    candidates: Sequence[Candidate],
    *,
    routing: Routing,
    key: str,
    imbalance: float,
    turn: int,
) -> Choice:
    """``candidates`` is not empty; ``turn`` counts requests, for round robin."""
    if routing == "round-robin":
        return Choice(candidates[turn % len(candidates)].name, "round-robin")
    least = min(candidates, key=lambda c: c.load)
    if routing == "least-load" or not key:
        return Choice(least.name, "least-load" if key else "least-load (no session key)")
    home = max(candidates, key=lambda c: rendezvous_score(key, c.name))
    if home.load - least.load > imbalance:
        return Choice(least.name, f"least-load ({home.name} over by {home.load - least.load:g})")
    return Choice(home.name, "affinity")
