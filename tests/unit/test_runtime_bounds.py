"""Runtime's own maps stay bounded however long the server runs."""

from __future__ import annotations

from pathlib import Path

from kefu.engine.fake import FakeEngine
from kefu.fastpath.hours import ServiceHours
from kefu.limits.admission import Admission
from kefu.service.runtime import ASKED_MAX, Runtime
from kefu.sessions.locks import SessionLocks
from kefu.settings import Settings
from kefu.store.sqlite import SqliteSessionStore


def test_asked_counts_keep_the_most_asked_within_the_bound(tmp_path: Path) -> None:
    settings = Settings.model_validate({"data_dir": tmp_path})
    runtime = Runtime(
        settings=settings,
        engine=FakeEngine(),
        store=SqliteSessionStore(tmp_path / "sessions.db"),
        admission=Admission(slots=1, max_waiting=1, timeout=1.0),
        locks=SessionLocks(1.0),
        hours=ServiceHours.parse(settings.service_hours),
    )
    try:
        for _ in range(5):
            runtime.count_asked("popular")
        for i in range(3 * ASKED_MAX):  # a knowledge base replaced again and again
            runtime.count_asked(f"entry-{i}")
            assert len(runtime.asked) <= ASKED_MAX
        assert runtime.asked["popular"] == 5  # the most asked stay
    finally:
        runtime.prompts.shutdown()
