"""AnswerCache end to end on SQLite with the real embedder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kefu.cache.answers import AnswerCache, Lookup
from kefu.knowledge.embedder import Vectors
from kefu.sqlite_files import open_wal
from tests.unit.cache.conftest import FakeClock

Embed = Callable[[str], Vectors]
SCOPE = AnswerCache.scope("You are a shop assistant.", "shop-1")
SINGAPORE = "do you deliver to Singapore?"


def ask(cache: AnswerCache, embed: Embed, question: str) -> Lookup:
    return cache.lookup(SCOPE, question, embed(question))


def test_singapore_answer_is_not_served_for_malaysia(cache: AnswerCache, embed: Embed) -> None:
    stored = cache.put(SCOPE, SINGAPORE, "Yes, in 2-4 days.", embed(SINGAPORE))
    assert stored is not None

    malaysia = ask(cache, embed, "do you deliver to Malaysia?")
    assert malaysia.answer is None
    assert malaysia.kind == "miss"
    assert malaysia.distance is not None
    assert malaysia.distance <= cache.threshold  # near enough: the guard refused it
    assert malaysia.nearest == SINGAPORE
    assert malaysia.rejected == "places differ: malaysia vs singapore"

    exact = ask(cache, embed, "Do you deliver to Singapore")
    assert exact.kind == "exact"
    assert exact.answer is not None
    assert exact.answer.answer == "Yes, in 2-4 days."

    paraphrase = ask(cache, embed, "can you deliver to Singapore?")
    assert paraphrase.kind == "semantic"
    assert paraphrase.answer is not None
    assert paraphrase.answer.id == stored.id
    assert paraphrase.answer.hits == 2


@pytest.mark.parametrize(
    ("cached", "asked", "reason"),
    [
        ("Is there a 2-year warranty?", "Is there a 3-year warranty?", "numbers differ: 3 vs 2"),
        ("can I cancel my order?", "can't I cancel my order?", "negation differs"),
        ("can I cancel my order?", "I don't want to cancel my order", "negation differs"),
        ("送到新加坡吗", "送到马来西亚吗", "places differ: malaysia vs singapore"),
        ("能退货吗", "不能退货吗", "negation differs"),
    ],
)
def test_near_misses_are_not_served(
    cache_path: Path, embed: Embed, cached: str, asked: str, reason: str
) -> None:
    # A threshold loose enough (0.25) that every pair is within it: the guard decides.
    loose = AnswerCache(cache_path, threshold=0.25, ttl=3600)
    try:
        loose.put(SCOPE, cached, "an answer", embed(cached))
        result = loose.lookup(SCOPE, asked, embed(asked))
    finally:
        loose.close()
    assert result.answer is None
    assert result.distance is not None
    assert result.distance <= 0.25
    assert result.rejected is not None
    assert result.rejected.startswith(reason)


def test_far_question_is_above_threshold(cache: AnswerCache, embed: Embed) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    result = cache.lookup(SCOPE, "what colours does the sofa come in?", embed("sofa colours"))
    assert (result.kind, result.rejected) == ("miss", "above threshold")


def test_an_empty_scope_has_no_distance(cache: AnswerCache, embed: Embed) -> None:
    result = ask(cache, embed, SINGAPORE)
    assert (result.answer, result.kind, result.distance) == (None, "miss", None)


def test_scopes_are_isolated(cache: AnswerCache, embed: Embed) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    other_tenant = AnswerCache.scope("You are a shop assistant.", "shop-2")
    other_persona = AnswerCache.scope("You are a pirate.", "shop-1")
    assert len({SCOPE, other_tenant, other_persona}) == 3
    for scope in (other_tenant, other_persona):
        result = cache.lookup(scope, SINGAPORE, embed(SINGAPORE))
        assert result.answer is None
        assert result.distance is None
    assert [e.question for e in cache.entries(SCOPE)] == [SINGAPORE]
    assert cache.entries(other_tenant) == []


def test_entries_expire(cache: AnswerCache, embed: Embed, clock: FakeClock) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    clock.now += 3599
    assert cache.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).kind == "exact"
    clock.now += 2
    assert cache.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).kind == "miss"
    assert cache.entries() == []
    cache.flush()  # a lookup never writes; the flush deletes the row it found expired
    assert cache.purge_expired() == 0


def test_a_lookup_never_waits_for_the_file(
    cache: AnswerCache, cache_path: Path, embed: Embed, clock: FakeClock
) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    clock.now += 3601  # expired: the lookup forgets it, and the flush deletes its row
    writer = open_wal(cache_path)  # `kefu cache evict`, mid-write
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert cache.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).kind == "miss"
    finally:
        writer.rollback()
        writer.close()
    cache.flush()
    assert cache.purge_expired() == 0


def test_invalidate_by_source(cache: AnswerCache, embed: Embed) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE), sources=["kb-shipping"])
    cache.put(SCOPE, "Can I pay by card?", "Yes.", embed("Can I pay by card?"), sources=["kb-pay"])
    assert cache.invalidate(source_ids={"kb-shipping"}) == 1
    assert [e.question for e in cache.entries()] == ["Can I pay by card?"]
    assert cache.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).answer is None


def test_invalidate_by_nearness(cache: AnswerCache, embed: Embed) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    cache.put(SCOPE, "Can I pay by card?", "Yes.", embed("Can I pay by card?"))
    changed = np.stack([embed("Which countries do you deliver to?")])
    assert cache.invalidate(near=changed, within=0.2) == 1
    assert [e.question for e in cache.entries()] == ["Can I pay by card?"]
    assert cache.invalidate(near=changed, within=0.2) == 0


def test_refresh_sees_another_connection(cache_path: Path, clock: FakeClock, embed: Embed) -> None:
    server = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock)
    admin = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock)
    try:
        assert not server.refresh()
        stored = admin.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
        assert stored is not None
        assert server.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).kind == "miss"  # memory only
        assert server.refresh()
        assert not server.refresh()  # nothing new since
        assert server.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).kind == "exact"
        assert admin.evict(ids=[stored.id]) == 1
        assert server.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).kind == "exact"
        assert server.refresh()
        assert server.lookup(SCOPE, SINGAPORE, embed(SINGAPORE)).kind == "miss"
    finally:
        server.close()
        admin.close()


def test_lookups_are_recorded(cache: AnswerCache, embed: Embed) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    ask(cache, embed, "do you deliver to Malaysia?")
    cache.lookup(SCOPE, SINGAPORE, embed(SINGAPORE))
    cache.lookup(SCOPE, "where is order LH-100234?", embed("where is order LH-100234?"))
    records = cache.lookups()
    assert [(r.question, r.kind) for r in records] == [
        (SINGAPORE, "exact"),
        ("do you deliver to Malaysia?", "miss"),
    ]  # newest first; the customer's own order number is not kept
    assert records[0].distance == 0.0
    assert records[1].nearest == SINGAPORE
    assert records[1].distance is not None
    assert 0 < records[1].distance < 0.2
    assert records[1].rejected == "places differ: malaysia vs singapore"


@pytest.mark.parametrize(
    "question",
    ["Where is order LH-100234?", "my email is ann@example.com, any news?", "call +65 6123 4567"],
)
def test_questions_with_customer_data_are_never_cached(
    cache: AnswerCache, embed: Embed, question: str
) -> None:
    assert cache.put(SCOPE, question, "It ships tomorrow.", embed(question)) is None
    assert cache.entries() == []
    result = cache.lookup(SCOPE, question, embed(question))
    assert (result.answer, result.rejected) == (None, "personal data")


def test_put_replaces_the_same_question(cache: AnswerCache, embed: Embed) -> None:
    cache.put(SCOPE, SINGAPORE, "old", embed(SINGAPORE))
    cache.put(SCOPE, "Do you deliver to Singapore", "new", embed(SINGAPORE))
    entries = cache.entries()
    assert [e.answer for e in entries] == ["new"]


def test_least_recently_used_goes_first(cache_path: Path, clock: FakeClock, embed: Embed) -> None:
    small = AnswerCache(cache_path, threshold=0.07, ttl=3600, max_entries=2, clock=clock)
    try:
        questions = [SINGAPORE, "Can I pay by card?", "Do you sell gift cards?"]
        small.put(SCOPE, questions[0], "a", embed(questions[0]))
        small.put(SCOPE, questions[1], "b", embed(questions[1]))
        small.lookup(SCOPE, questions[0], embed(questions[0]))  # now the second is oldest
        small.put(SCOPE, questions[2], "c", embed(questions[2]))
        assert {e.question for e in small.entries()} == {questions[0], questions[2]}
    finally:
        small.close()


def test_churn_keeps_the_expiry_heap_bounded(
    cache_path: Path, clock: FakeClock, embed: Embed
) -> None:
    # Every put of a day's TTL would stay in the heap otherwise: replaced and evicted
    # answers are only taken out of it when they expire.
    small = AnswerCache(cache_path, threshold=0.07, ttl=86400, max_entries=4, clock=clock)
    try:
        questions = [SINGAPORE, "Can I pay by card?", "Do you sell gift cards?"]
        for i in range(300):
            question = questions[i % 3]
            small.put(SCOPE, question, f"answer {i}", embed(question))  # replaces
            small.put(SCOPE, f"do you sell item {i}?", "yes", embed(f"do you sell item {i}?"))
            clock.now += 1
        assert len(small.entries()) == 4
        assert len(small._expiry) <= 2 * 4 + 64 + 1
        # Nothing held was lost from the heap: each still expires with its TTL.
        clock.now += 86400
        assert all(ask(small, embed, q).kind == "miss" for q in questions)
        assert small.entries() == []
    finally:
        small.close()


def test_evict_by_scope_and_everything(cache: AnswerCache, embed: Embed) -> None:
    other = AnswerCache.scope("persona", "shop-2")
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    cache.put(other, SINGAPORE, "Yes.", embed(SINGAPORE))
    cache.put(other, "Can I pay by card?", "Yes.", embed("Can I pay by card?"))
    assert cache.evict() == 0
    assert cache.evict(scope=other) == 2
    assert cache.evict(everything=True) == 1
    assert cache.entries() == []


def test_reopening_keeps_entries_and_hits(cache_path: Path, clock: FakeClock, embed: Embed) -> None:
    first = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock)
    first.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    first.lookup(SCOPE, SINGAPORE, embed(SINGAPORE))
    first.close()
    again = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock)
    try:
        [entry] = again.entries()
        assert (entry.question, entry.hits) == (SINGAPORE, 1)
        assert ask(again, embed, "can you deliver to Singapore?").answer
    finally:
        again.close()


def test_bad_settings_are_refused(cache_path: Path) -> None:
    with pytest.raises(ValueError, match="ttl"):
        AnswerCache(cache_path, threshold=0.05, ttl=0)


def test_a_message_of_no_known_word_is_matched_exactly_or_not_at_all(
    cache: AnswerCache, embed: Embed
) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    unknown = "배송 언제 와요?"  # Korean: no word of the static table
    zero = embed(unknown)
    assert not zero.any()
    assert cache.lookup(SCOPE, unknown, zero).kind == "miss"  # no error, no semantic match
    assert cache.put(SCOPE, unknown, "an answer", zero) is None
    assert cache.lookup(SCOPE, SINGAPORE, zero).kind == "exact"


def test_answers_of_another_embedder_are_dropped(
    cache_path: Path, clock: FakeClock, embed: Embed
) -> None:
    old = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock, embedder="e5/384")
    old.put(SCOPE, "an old question", "an old answer", np.ones(384, dtype=np.float32))
    old.close()
    same = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock, embedder="e5/384")
    assert len(same.entries()) == 1
    same.close()
    new = AnswerCache(cache_path, threshold=0.2, ttl=3600, clock=clock, embedder="static/128")
    try:
        assert new.entries() == []  # 384-dimension vectors would not compare with 128
        assert new.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE)) is not None
        assert new.lookup(
            SCOPE, "can you deliver to Singapore?", embed("can you deliver to Singapore?")
        ).answer
    finally:
        new.close()


def test_invalidate_with_nothing_changed(cache: AnswerCache, embed: Embed) -> None:
    cache.put(SCOPE, SINGAPORE, "Yes.", embed(SINGAPORE))
    assert cache.invalidate(near=np.zeros((0, 128), dtype=np.float32), within=0.5) == 0
    assert cache.invalidate() == 0
    assert len(cache.entries()) == 1
