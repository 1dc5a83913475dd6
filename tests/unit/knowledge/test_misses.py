"""The miss log: declined questions kept, counted, listed and turned into an import."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from kefu.cli import main
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.importers import parse_file
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.knowledge.review import review

DELIVERY = KbEntry.make("How long does delivery take?", "Two to four business days.")
RETURNS = KbEntry.make("How do I start a return?", "Open the order and press Return.")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def test_misses_are_counted_per_message_most_frequent_first(tmp_path: Path) -> None:
    log = MissLog(tmp_path / MISSES_FILE, clock=Clock())
    log.record("when does my sofa get here", DELIVERY, 0.41, "faq 0.41 below threshold 0.45")
    log.record("can i send back a throw blanket", RETURNS, 0.62, "never mentions blanket")
    log.record("When does my sofa get here?", DELIVERY, 0.42, "faq 0.42 below threshold 0.45")
    assert log.top() == log.top()  # reading flushes once; nothing is counted twice
    first, second = log.top()
    assert (first.count, first.question, first.score) == (2, DELIVERY.question, 0.42)
    assert first.message == "When does my sofa get here?"  # the latest wording
    assert (second.count, second.reason) == (1, "never mentions blanket")
    log.close()
    again = MissLog(tmp_path / MISSES_FILE)
    assert [m.count for m in again.top()] == [2, 1]  # kept on disk
    assert again.clear() == 2
    assert again.top() == []
    again.close()


def test_the_customers_own_data_is_never_kept(tmp_path: Path) -> None:
    log = MissLog(tmp_path / MISSES_FILE)
    log.record("where is LH-100234, it should be here", DELIVERY, 0.5, "why")
    log.record("mail me at mei@example.com about my return", RETURNS, 0.5, "why")
    log.record("   ", RETURNS, 0.5, "why")
    # The fast path has read the message's entities already: its word is taken.
    log.record("call me on 0412 345 678", RETURNS, 0.5, "why", personal=True)
    assert log.top() == []
    log.record("when does my sofa get here", DELIVERY, 0.5, "why", personal=False)
    assert [m.message for m in log.top()] == ["when does my sofa get here"]
    log.close()


def test_only_the_most_recent_are_kept(tmp_path: Path) -> None:
    log = MissLog(tmp_path / MISSES_FILE, max_rows=2, clock=Clock())
    for n in ("one", "two", "three"):
        log.record(f"question {n}", DELIVERY, 0.4, "why")
    log.flush()
    assert sorted(m.message for m in log.top()) == ["question three", "question two"]
    log.close()


def test_kefu_kb_misses_lists_and_writes_an_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert main(["kb", "misses", "--data-dir", str(data)]) == 0
    assert "no misses recorded yet" in capsys.readouterr().err
    log = MissLog(data / MISSES_FILE)
    log.record("when does my sofa get here", DELIVERY, 0.41, "faq 0.41 below threshold 0.45")
    log.close()

    assert main(["kb", "misses", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "when does my sofa get here" in out
    assert DELIVERY.question in out
    assert main(["kb", "misses", "--data-dir", str(data), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["entry_id"] == DELIVERY.id

    target = tmp_path / "misses.csv"
    assert main(["kb", "misses", "--data-dir", str(data), "--as-import", str(target)]) == 0
    [entry] = parse_file(target)  # what `kefu kb import` reads
    assert (entry.question, entry.answer) == ("when does my sofa get here", DELIVERY.answer)
    assert main(["kb", "misses", "--data-dir", str(data), "--clear"]) == 0
    assert capsys.readouterr().out.endswith("forgot 1 misses\n")


def _kb_with(data: Path, *entries: KbEntry) -> None:
    kb = KnowledgeBase.open(data / "knowledge.db", StaticEmbedder())
    kb.add(list(entries))
    kb.close()


def _questions(data: Path) -> dict[str, str]:
    kb = KnowledgeBase.open(data / "knowledge.db", StaticEmbedder())
    try:
        return {entry.question: entry.answer for entry in kb.entries()}
    finally:
        kb.close()


def test_an_accepted_miss_becomes_a_question_of_the_chosen_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    _kb_with(data, DELIVERY, RETURNS)
    log = MissLog(data / MISSES_FILE, clock=Clock())
    log.record("when does my sofa get here", RETURNS, 0.41, "below threshold")  # wrong best
    log.record("can i send back a throw blanket", RETURNS, 0.62, "never mentions blanket")
    log.record("is there a gym nearby", DELIVERY, 0.30, "below threshold")
    sofa, blanket, gym = sorted(log.top(), key=lambda m: m.id)
    log.close()
    assert sofa.id < blanket.id < gym.id

    base = ["kb", "misses", "--data-dir", str(data)]
    assert main([*base, "accept", str(sofa.id), DELIVERY.id]) == 0  # the reviewer's pick
    assert main(["kb", "misses", "accept", str(blanket.id), "--data-dir", str(data)]) == 0
    assert main([*base, "reject", str(gym.id)]) == 0
    questions = _questions(data)
    assert questions["when does my sofa get here"] == DELIVERY.answer
    assert questions["can i send back a throw blanket"] == RETURNS.answer  # its best entry
    assert "is there a gym nearby" not in questions
    capsys.readouterr()

    assert main(base) == 0
    assert "sofa" not in capsys.readouterr().out  # reviewed misses leave the open list
    assert main([*base, "--state", "accepted", "--json"]) == 0
    accepted = json.loads(capsys.readouterr().out)
    assert sorted(row["id"] for row in accepted) == [sofa.id, blanket.id]
    # Seen again, a rejected message is counted on its row, not listed as open again.
    log = MissLog(data / MISSES_FILE)
    log.record("is there a gym nearby", DELIVERY, 0.30, "below threshold")
    assert log.top() == []
    assert [m.count for m in log.top(state="rejected")] == [2]
    log.close()


def test_reviewing_a_miss_twice_or_an_unknown_one_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    passage = KbEntry.make("Delivery zones", "We deliver island-wide.", kind="passage")
    _kb_with(data, DELIVERY, passage)
    log = MissLog(data / MISSES_FILE)
    log.record("when does my sofa get here", DELIVERY, 0.41, "below threshold")
    [miss] = log.top()
    log.close()
    base = ["kb", "misses", "--data-dir", str(data)]
    capsys.readouterr()
    assert main([*base, "accept", "999"]) == 2
    assert "no miss 999" in capsys.readouterr().err
    assert main([*base, "accept", str(miss.id), "nosuchentry"]) == 2
    assert "no knowledge entry with id nosuchentry" in capsys.readouterr().err
    assert main([*base, "accept", str(miss.id), passage.id]) == 2
    assert "a passage" in capsys.readouterr().err
    assert main([*base, "accept", str(miss.id)]) == 0
    assert main([*base, "accept", str(miss.id)]) == 2
    assert "accepted already" in capsys.readouterr().err
    assert main([*base, "reject", str(miss.id), "999"]) == 2  # all or none
    log = MissLog(data / MISSES_FILE)
    assert [m.id for m in log.top(state="accepted")] == [miss.id]
    log.close()


def test_review_walks_the_open_misses(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _kb_with(data, DELIVERY, RETURNS)
    log = MissLog(data / MISSES_FILE, clock=Clock())
    # The most recent first, at equal counts: recorded in reverse.
    for message in (
        "what colour is the sky",
        "is there a gym nearby",
        "can i send back a throw blanket",
        "when does my sofa get here",
    ):
        log.record(message, DELIVERY, 0.4, "below threshold")
    log.flush()
    kb = KnowledgeBase.open(data / "knowledge.db", StaticEmbedder())
    shown: list[str] = []
    # 1: the recorded entry; RETURNS.id named; "x" is no entry (asked again), then r; q stops.
    replies = iter(["1", RETURNS.id, "x", "r", "q"])
    done = review(kb, log, ask=lambda _: next(replies), say=shown.append, limit=10)
    assert done == {"accepted": 2, "rejected": 1, "skipped": 0}
    assert any("no knowledge entry with id x" in line for line in shown)
    added = {e.question: e.answer for e in kb.entries()}
    assert added["when does my sofa get here"] == DELIVERY.answer
    assert added["can i send back a throw blanket"] == RETURNS.answer
    assert [m.message for m in log.top()] == ["what colour is the sky"]
    kb.close()
    log.close()


def test_a_miss_log_from_before_ids_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / MISSES_FILE
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE misses (norm TEXT PRIMARY KEY, message TEXT NOT NULL, entry_id TEXT NOT "
        "NULL, question TEXT NOT NULL, answer TEXT NOT NULL, score REAL NOT NULL, reason TEXT "
        "NOT NULL, count INTEGER NOT NULL, last_at REAL NOT NULL);"
        "INSERT INTO misses VALUES ('a', 'A?', 'e1', 'Q', 'Ans', 0.4, 'why', 3, 10.0);"
    )
    db.commit()
    db.close()
    log = MissLog(path)
    [miss] = log.top()
    assert (miss.message, miss.count, miss.state, miss.id) == ("A?", 3, "open", 1)
    log.close()
