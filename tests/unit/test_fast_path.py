"""The fast path reads the knowledge base ahead of its customers, and looks a message up
on the event loop itself unless the knowledge base or the cache is busy."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

import pytest

import kefu.service.kb_threads as kb_threads_module
from kefu.cache.answers import AnswerCache
from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import SqliteOrders
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.entries import KbEntry
from kefu.service.fast_path import FastPath
from kefu.settings import Settings

GENERAL = "Which novel would you recommend for a long train ride?"


@pytest.fixture
async def fast_path(settings_factory: Callable[..., Settings]) -> AsyncIterator[FastPath]:
    settings: Settings = settings_factory(fast_path=True)
    orders = SqliteOrders(settings.data_dir / "orders.db")
    await orders.open()
    hours = ServiceHours.parse(settings.service_hours)
    opened = FastPath(settings, embedder_factory=StaticEmbedder, orders=orders, hours=hours)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def threads_searching(fast_path: FastPath, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads that searched the knowledge base, in order."""
    kb = fast_path.kb
    assert kb is not None
    seen: list[int] = []
    search = kb.search

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(threading.get_ident())
        return search(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kb, "search", recording)
    return seen


def assert_searched_once_on_the_worker(seen: list[int]) -> None:
    """One search, on a thread that is not the event loop's (the test's own)."""
    assert len(seen) == 1
    assert seen != [threading.get_ident()]


@pytest.mark.anyio
async def test_the_demo_is_read_before_serving_and_an_import_when_asked(
    fast_path: FastPath,
) -> None:
    def unread(kb: KnowledgeBase) -> list[str]:
        return kb.unread(9)

    assert await fast_path.read_kb(unread) == []  # the whole demo, in open()
    entry = KbEntry.make("Do you have a showroom?", "Yes: 12 Lumen Lane.")
    await fast_path.import_entries([entry])
    assert await fast_path.read_kb(unread) == [entry.question, entry.answer]
    assert await fast_path.read_ahead() == 2
    assert await fast_path.read_kb(unread) == []
    assert await fast_path.read_ahead() == 0


@pytest.mark.anyio
async def test_an_idle_fast_path_looks_up_on_the_event_loop(
    fast_path: FastPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = threads_searching(fast_path, monkeypatch)
    plan = await fast_path.plan(GENERAL, scope="t", failures=0)
    assert plan.tier == "llm"
    assert seen == [threading.get_ident()]


@pytest.mark.anyio
async def test_a_large_knowledge_base_is_searched_on_the_fast_paths_thread(
    fast_path: FastPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = threads_searching(fast_path, monkeypatch)
    assert fast_path.kb is not None
    monkeypatch.setattr(kb_threads_module, "INLINE_MAX_ENTRIES", len(fast_path.kb) - 1)
    assert (await fast_path.plan(GENERAL, scope="t", failures=0)).tier == "llm"
    assert_searched_once_on_the_worker(seen)


@pytest.mark.anyio
async def test_a_lookup_waits_on_the_fast_paths_thread_while_it_is_busy(
    fast_path: FastPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = threads_searching(fast_path, monkeypatch)
    started, release = threading.Event(), threading.Event()

    def busy() -> int:  # a long refresh or import, as far as a lookup can tell
        started.set()
        release.wait(5)
        return threading.get_ident()

    job = asyncio.ensure_future(fast_path.run(busy))
    assert await asyncio.to_thread(started.wait, 5)
    lookup = asyncio.ensure_future(fast_path.plan(GENERAL, scope="t", failures=0))
    await asyncio.sleep(0.05)  # the loop goes on meanwhile; the lookup waits its turn
    assert not lookup.done()
    assert seen == []
    release.set()
    worker = await job
    assert (await lookup).tier == "llm"
    assert seen == [worker]


@pytest.mark.anyio
async def test_a_lookup_does_not_overtake_a_job_queued_before_it(
    fast_path: FastPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = threads_searching(fast_path, monkeypatch)
    release = threading.Event()
    # The knowledge base's thread, not yet its lock.
    blocker = fast_path.worker.threads._worker.submit(release.wait, 5)
    order: list[str] = []
    job = asyncio.ensure_future(fast_path.run(lambda: order.append("job")))
    lookup = asyncio.ensure_future(fast_path.plan(GENERAL, scope="t", failures=0))
    await asyncio.sleep(0.05)
    assert not lookup.done()  # the lock is free, but a job came first
    release.set()
    await job
    await lookup
    assert blocker.result() is True
    assert order == ["job"]
    assert_searched_once_on_the_worker(seen)


@pytest.mark.anyio
async def test_the_cache_commands_changes_are_served_from_the_next_refresh_round(
    fast_path: FastPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = fast_path.scope("t")
    plan = await fast_path.plan(GENERAL, scope=scope, failures=0)
    assert plan.vector is not None
    cached = await fast_path.remember(scope, GENERAL, "Try a long mystery.", plan.vector, ())
    assert cached is not None
    seen = threads_searching(fast_path, monkeypatch)
    assert (await fast_path.plan(GENERAL, scope=scope, failures=0)).tier == "cache"
    assert fast_path.cache is not None
    command = AnswerCache(fast_path.cache.path, threshold=0.1, ttl=60)  # `kefu cache evict`
    try:
        assert command.evict(ids=[cached.id]) == 1
    finally:
        command.close()
    # A lookup on the event loop reads memory only: it never waits for the disk.
    assert (await fast_path.plan(GENERAL, scope=scope, failures=0)).tier == "cache"
    await fast_path.refresh()
    assert (await fast_path.plan(GENERAL, scope=scope, failures=0)).tier == "llm"
    assert seen == [threading.get_ident()] * 3
