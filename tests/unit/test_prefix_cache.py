"""PrefixCache: longest-common-prefix matching, LRU eviction, pinning, covered entries."""

from __future__ import annotations

import pytest

from kefu.engine.llamacpp.prefix_cache import PrefixCache, common_prefix_len


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((), (1, 2), 0),
        ((1, 2, 3), (1, 2, 3), 3),
        ((1, 2, 3), (1, 2, 3, 4), 3),
        ((1, 2, 3, 4), (1, 2, 9, 4), 2),
        ((5, 2, 3), (1, 2, 3), 0),
        (tuple(range(1000)), (*range(777), -1), 777),
    ],
)
def test_common_prefix_len(a: tuple[int, ...], b: tuple[int, ...], expected: int) -> None:
    assert common_prefix_len(a, b) == expected
    assert common_prefix_len(b, a) == expected


def test_match_picks_the_longest_prefix_and_counts_reuse() -> None:
    cache = PrefixCache(capacity=4, min_reuse=2)
    cache.add(0, tuple(range(10)))
    cache.add(1, (*range(20), 99))
    entry, reused = cache.match((*range(15), 42))
    assert entry is not None
    assert entry.seq_id == 1
    assert reused == 15
    assert cache.stats.hits == 1
    assert cache.stats.reused_tokens == 15
    assert cache.stats.prompt_tokens == 16


def test_match_leaves_one_token_to_prefill() -> None:
    cache = PrefixCache(capacity=2, min_reuse=2)
    cache.add(0, tuple(range(10)))
    _, reused = cache.match(tuple(range(10)))
    assert reused == 9  # the last prompt token must be decoded to get logits


def test_short_matches_are_misses() -> None:
    cache = PrefixCache(capacity=2, min_reuse=8)
    cache.add(0, (1, 2, 3, 4))
    entry, reused = cache.match((1, 2, 3, 4, 5, 6))
    assert (entry, reused) == (None, 0)
    assert cache.stats.hits == 0
    assert cache.stats.lookups == 1


def test_lru_eviction_when_full_spares_recently_used_and_pinned() -> None:
    cache = PrefixCache(capacity=3, min_reuse=1)
    cache.add(0, (100, 1), pinned=True)
    cache.add(1, (200, 1))
    cache.add(2, (300, 1))
    cache.match((200, 1, 5))  # entry 1 is now more recent than entry 2
    evicted = cache.add(3, (400, 1))
    assert evicted == [2]
    assert set(cache.entries) == {0, 1, 3}
    assert cache.stats.evictions == 1


def test_an_entry_the_new_one_extends_is_dropped() -> None:
    cache = PrefixCache(capacity=4, min_reuse=1)
    cache.add(0, (1, 2, 3))
    evicted = cache.add(1, (1, 2, 3, 4, 5))
    assert evicted == [0]
    assert set(cache.entries) == {1}


def test_all_pinned_means_the_new_entry_is_not_kept() -> None:
    cache = PrefixCache(capacity=1, min_reuse=1)
    cache.add(0, (1, 2), pinned=True)
    assert cache.add(5, (7, 8)) == [5]
    assert set(cache.entries) == {0}


def test_capacity_zero_keeps_nothing() -> None:
    cache = PrefixCache(capacity=0)
    assert cache.add(3, (1, 2, 3)) == [3]
    assert cache.entries == {}
    assert cache.evict() is None


def test_the_token_budget_evicts_least_recently_used_first() -> None:
    cache = PrefixCache(capacity=10, token_budget=10, min_reuse=1)
    cache.add(0, (1, 1, 1, 1), pinned=True)
    cache.add(1, (2, 2, 2))
    cache.add(2, (3, 3, 3))
    assert cache.add(3, (4, 4, 4)) == [1]  # 4 + 3 + 3 + 3 > 10: the oldest unpinned goes
    assert set(cache.entries) == {0, 2, 3}
    assert cache.cached_tokens == 10


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    cache = PrefixCache(capacity=10, token_budget=4, min_reuse=1)
    cache.add(0, (1, 2))
    assert cache.add(1, (5, 6, 7, 8, 9)) == [1]
    assert set(cache.entries) == {0}


def test_reusable_says_what_match_would_reuse_and_changes_nothing() -> None:
    cache = PrefixCache(capacity=4, min_reuse=2)
    cache.add(0, tuple(range(10)))
    cache.add(1, (*range(20), 99))
    before = (
        cache.stats.lookups,
        cache.stats.hits,
        {e.seq_id: e.last_used for e in cache.entries.values()},
    )
    assert cache.reusable((*range(15), 42)) == 15
    assert cache.reusable(tuple(range(20))) == 19  # one token is always left to read
    assert cache.reusable((1, 2, 3)) == 0  # no prefix in common
    assert cache.reusable((0, 7)) == 0  # shorter than min_reuse
    after = (
        cache.stats.lookups,
        cache.stats.hits,
        {e.seq_id: e.last_used for e in cache.entries.values()},
    )
    assert after == before
    assert cache.match((*range(15), 42))[1] == 15
