"""PrefixCache: a free stream for each prompt (the KV it kept, or a host copy restored),
LRU eviction of host copies, pinning, covered copies."""

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


def test_a_prompt_gets_the_free_stream_that_kept_the_longest_prefix() -> None:
    cache = PrefixCache(streams=3, capacity=0, min_reuse=2)
    for stream, kept in enumerate((tuple(range(10)), (*range(20), 99), (7, 7, 7))):
        cache.busy[stream] = True
        cache.end(stream, kept)
    start = cache.start((*range(15), 42))
    assert (start.stream, start.reuse, start.restore) == (1, 15, None)
    assert cache.held[1] == tuple(range(15))  # the rest was another conversation's
    assert cache.busy == [False, True, False]
    assert (cache.stats.hits, cache.stats.reused_tokens, cache.stats.prompt_tokens) == (1, 15, 16)
    start = cache.start((*range(15), 43))  # stream 1 is busy: the next best
    assert (start.stream, start.reuse) == (0, 10)


def test_a_prompt_leaves_one_token_to_prefill_and_short_matches_are_misses() -> None:
    cache = PrefixCache(streams=2, capacity=0, min_reuse=8)
    cache.end(0, tuple(range(10)))
    cache.end(1, (1, 2, 3, 4))
    assert cache.start(tuple(range(10))).reuse == 9  # its last token is read for logits
    start = cache.start((1, 2, 3, 4, 5, 6))
    assert (start.stream, start.reuse) == (1, 0)
    assert cache.stats.hits == 1
    assert cache.stats.lookups == 2


def test_a_stream_nothing_matches_is_the_least_recently_used() -> None:
    cache = PrefixCache(streams=3, capacity=0, min_reuse=1)
    for prompt in ((1, 1), (2, 2), (3, 3), (1, 1, 5)):
        cache.end(cache.start(prompt).stream, prompt)
    assert cache.held == [(1, 1, 5), (2, 2), (3, 3)]
    assert cache.start((9, 9)).stream == 1  # (2, 2): the oldest
    cache.start((9, 9))
    cache.start((9, 9))
    with pytest.raises(LookupError):
        cache.start((9, 9))


def test_a_host_copy_longer_than_any_free_stream_is_restored_into_the_oldest() -> None:
    cache = PrefixCache(streams=2, capacity=4, min_reuse=2)
    conversation = tuple(range(30))
    cache.save(conversation, b"kv")
    cache.end(cache.start((5, 5, 5)).stream, (5, 5, 5))  # stream 0, the older
    cache.end(cache.start((6, 6, 6)).stream, (6, 6, 6))  # stream 1
    start = cache.start((*conversation, 100))
    assert (start.stream, start.reuse) == (0, 30)
    assert start.restore is not None
    assert start.restore.state == b"kv"
    assert cache.stats.restores == 1


def test_lru_eviction_of_host_copies_spares_recently_used_and_pinned() -> None:
    cache = PrefixCache(streams=1, capacity=3, min_reuse=1)
    cache.save((100, 1), b"", pinned=True)
    cache.save((200, 1), b"")
    cache.save((300, 1), b"")
    cache.end(cache.start((200, 1, 5)).stream, ())  # the copy of (200, 1): more recent
    cache.save((400, 1), b"")
    assert set(cache.saved) == {(100, 1), (200, 1), (400, 1)}
    assert cache.stats.evictions == 1


def test_a_copy_the_new_one_extends_goes_and_a_covered_one_is_not_worth_saving() -> None:
    cache = PrefixCache(streams=1, capacity=4, min_reuse=1)
    cache.save((1, 2, 3), b"")
    cache.save((1, 2, 3, 4, 5), b"")
    assert set(cache.saved) == {(1, 2, 3, 4, 5)}
    assert not cache.worth_saving((1, 2, 3))
    assert cache.worth_saving((1, 2, 9))


def test_all_pinned_means_the_new_copy_is_not_kept() -> None:
    cache = PrefixCache(streams=1, capacity=1, min_reuse=1)
    cache.save((1, 2), b"", pinned=True)
    cache.save((7, 8), b"")
    assert set(cache.saved) == {(1, 2)}
    assert not cache.evict()


def test_capacity_zero_saves_nothing() -> None:
    assert not PrefixCache(streams=1, capacity=0).worth_saving(tuple(range(100)))


def test_the_token_budget_evicts_least_recently_used_first() -> None:
    cache = PrefixCache(streams=1, capacity=10, token_budget=10, min_reuse=1)
    cache.save((1, 1, 1, 1), b"", pinned=True)
    cache.save((2, 2, 2), b"")
    cache.save((3, 3, 3), b"")
    cache.save((4, 4, 4), b"")  # 4 + 3 + 3 + 3 > 10: the oldest unpinned goes
    assert set(cache.saved) == {(1, 1, 1, 1), (3, 3, 3), (4, 4, 4)}
    assert cache.cached_tokens == 10
    assert not cache.worth_saving(tuple(range(5, 16)))  # larger than the whole budget


def test_reusable_says_what_start_would_reuse_and_changes_nothing() -> None:
    cache = PrefixCache(streams=2, capacity=4, min_reuse=2)
    cache.end(0, tuple(range(10)))
    cache.save((*range(20), 99), b"")
    before = (cache.stats.lookups, cache.busy[:], [e.last_used for e in cache.saved.values()])
    assert cache.reusable((*range(15), 42)) == 15
    assert cache.reusable(tuple(range(20))) == 19  # one token is always left to read
    assert cache.reusable((1, 2, 3)) == 0  # no prefix in common
    assert cache.reusable((0, 7)) == 0  # shorter than min_reuse
    after = (cache.stats.lookups, cache.busy[:], [e.last_used for e in cache.saved.values()])
    assert after == before
    assert cache.start((*range(15), 42)).reuse == 15


def test_a_host_copy_a_few_tokens_longer_than_the_stream_is_not_worth_a_restore() -> None:
    cache = PrefixCache(streams=1, capacity=4, min_reuse=4)
    cache.save((*range(20), 7, 7, 7), b"kv")  # the persona, and another conversation
    cache.end(0, tuple(range(20)))  # the stream kept the persona
    assert cache.reusable((*range(20), 7, 8, 9)) == 20  # what start will reuse, not 21
    start = cache.start((*range(20), 7, 8, 9))
    assert (start.stream, start.reuse, start.restore) == (0, 20, None)
