"""SqliteSessionStore on a temp file: lazy sessions, turns, ordering, deletion, persistence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kefu.engine.base import ChatMessage
from kefu.store.base import SessionStore, Turn
from kefu.store.sqlite import SqliteSessionStore

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
    s = SqliteSessionStore(tmp_path / "sessions.db")
    await s.open()
    try:
        yield s
    finally:
        await s.close()


async def add_turns(store: SqliteSessionStore, session_id: str, count: int, start: int = 1) -> None:
    for i in range(start, start + count):
        await store.append_turn(session_id, Turn(f"q{i}", f"a{i}"))


def test_is_a_session_store(tmp_path: Path) -> None:
    store: SessionStore = SqliteSessionStore(tmp_path / "x.db")
    assert store is not None


async def test_unknown_session(store: SqliteSessionStore) -> None:
    assert await store.get_session("nope") is None
    assert await store.messages("nope") == []
    assert await store.recent_turns("nope", 3) == []


async def test_append_turn_creates_session_lazily(store: SqliteSessionStore) -> None:
    assert await store.get_session("s1") is None
    await store.append_turn("s1", Turn("hi", "hello"), user_id="u-42")
    session = await store.get_session("s1")
    assert session is not None
    assert session.id == "s1"
    assert session.user_id == "u-42"
    assert session.created_at <= session.updated_at


async def test_later_turns_keep_the_first_user_id(store: SqliteSessionStore) -> None:
    await store.append_turn("s1", Turn("a", "b"), user_id="first")
    before = await store.get_session("s1")
    await store.append_turn("s1", Turn("c", "d"), user_id="second")
    after = await store.get_session("s1")
    assert before is not None
    assert after is not None
    assert after.user_id == "first"
    assert after.created_at == before.created_at
    assert after.updated_at >= before.updated_at


async def test_session_without_user_id(store: SqliteSessionStore) -> None:
    await store.append_turn("anon", Turn("a", "b"))
    session = await store.get_session("anon")
    assert session is not None
    assert session.user_id is None


async def test_messages_in_order(store: SqliteSessionStore) -> None:
    await add_turns(store, "s1", 3)
    messages = await store.messages("s1")
    assert [(m.role, m.content) for m in messages] == [
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
        ("user", "q3"),
        ("assistant", "a3"),
    ]
    assert [m.as_chat() for m in messages[:2]] == [
        ChatMessage("user", "q1"),
        ChatMessage("assistant", "a1"),
    ]


async def test_recent_turns_last_n_oldest_first(store: SqliteSessionStore) -> None:
    await add_turns(store, "s1", 5)
    recent = await store.recent_turns("s1", 2)
    assert [(m.role, m.content) for m in recent] == [
        ("user", "q4"),
        ("assistant", "a4"),
        ("user", "q5"),
        ("assistant", "a5"),
    ]


@pytest.mark.parametrize(("asked", "expected"), [(0, 0), (-1, 0), (1, 1), (3, 3), (10, 3)])
async def test_recent_turns_counts(store: SqliteSessionStore, asked: int, expected: int) -> None:
    await add_turns(store, "s1", 3)
    recent = await store.recent_turns("s1", asked)
    assert len(recent) == 2 * expected
    assert [m.content for m in recent[1::2]] == [f"a{i}" for i in range(4 - expected, 4)]


async def test_sessions_are_isolated(store: SqliteSessionStore) -> None:
    await add_turns(store, "a", 2)
    await add_turns(store, "b", 1, start=10)
    await add_turns(store, "a", 1, start=3)
    assert [m.content for m in await store.recent_turns("a", 2)] == ["q2", "a2", "q3", "a3"]
    assert [m.content for m in await store.messages("b")] == ["q10", "a10"]
    assert [m.content for m in await store.recent_turns("b", 5)] == ["q10", "a10"]


async def test_meta_round_trips(store: SqliteSessionStore) -> None:
    meta = {"tier": "fast", "finish_reason": "stop", "timings": {"ttft_ms": 12.5}, "n": [1, 2]}
    await store.append_turn("s1", Turn("你好", "您好\uff01", meta=meta))
    user, assistant = await store.messages("s1")
    assert user.meta == {}
    assert assistant.meta == meta
    assert user.content == "你好"
    assert assistant.content == "您好\uff01"
    assert user.created_at > 0


async def test_delete_session(store: SqliteSessionStore) -> None:
    await add_turns(store, "s1", 2)
    await add_turns(store, "keep", 1)
    assert await store.delete_session("s1") is True
    assert await store.get_session("s1") is None
    assert await store.messages("s1") == []
    assert await store.recent_turns("s1", 5) == []
    assert await store.delete_session("s1") is False
    assert await store.delete_session("never") is False
    # Other sessions are untouched.
    assert [m.content for m in await store.messages("keep")] == ["q1", "a1"]


async def test_session_can_restart_after_delete(store: SqliteSessionStore) -> None:
    await add_turns(store, "s1", 2)
    await store.delete_session("s1")
    await store.append_turn("s1", Turn("again", "yes"), user_id="u2")
    session = await store.get_session("s1")
    assert session is not None
    assert session.user_id == "u2"
    assert [m.content for m in await store.recent_turns("s1", 1)] == ["again", "yes"]


async def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "kefu.db"
    first = SqliteSessionStore(path)
    await first.open()
    await first.append_turn("s1", Turn("q", "a", meta={"k": 1}), user_id="u")
    await first.close()
    assert path.is_file()

    second = SqliteSessionStore(path)
    await second.open()
    try:
        session = await second.get_session("s1")
        assert session is not None
        assert session.user_id == "u"
        messages = await second.messages("s1")
        assert [(m.role, m.content, m.meta) for m in messages] == [
            ("user", "q", {}),
            ("assistant", "a", {"k": 1}),
        ]
        # Turn numbering continues after the reopen.
        await second.append_turn("s1", Turn("q2", "a2"))
        assert [m.content for m in await second.recent_turns("s1", 1)] == ["q2", "a2"]
    finally:
        await second.close()


async def test_use_before_open_fails(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "x.db")
    try:
        with pytest.raises(RuntimeError, match="not open"):
            await store.get_session("s")
    finally:
        await store.close()


async def test_resume_reads_the_session_and_its_last_turns_at_once(
    store: SqliteSessionStore,
) -> None:
    await add_turns(store, "s1", 3)
    session, recent = await store.resume("s1", 2)
    assert session == await store.get_session("s1")
    assert recent == await store.recent_turns("s1", 2)
    assert [m.content for m in recent] == ["q2", "a2", "q3", "a3"]
    assert await store.resume("nope", 2) == (None, [])
