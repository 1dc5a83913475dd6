"""Fixtures for the answer cache tests: the real embedder, a clock moved by hand."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kefu.cache.answers import AnswerCache
from kefu.knowledge.embedder import StaticEmbedder, Vectors


class FakeClock:
    """A clock the test moves by hand, for TTL."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="session")
def embedder(static_embedder: StaticEmbedder) -> StaticEmbedder:
    return static_embedder


@pytest.fixture(scope="session")
def embed(embedder: StaticEmbedder) -> Callable[[str], Vectors]:
    memo: dict[str, Vectors] = {}

    def one(text: str) -> Vectors:
        if text not in memo:
            memo[text] = embedder.embed_queries([text])[0]
        return memo[text]

    return one


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "cache.db"


@pytest.fixture
def cache(cache_path: Path, clock: FakeClock) -> Iterator[AnswerCache]:
    # 0.2 is far looser than what `kefu cache tune` picks on benchmarks/data/cache_pairs.csv
    # (about 0.06), so the near misses below are inside the threshold and it is the
    # guard, not the distance, that refuses them.
    opened = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock)
    yield opened
    opened.close()
