"""The miss log: declined questions kept, counted, listed and turned into an import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kefu.cli import main
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.importers import parse_file
from kefu.knowledge.misses import MISSES_FILE, MissLog

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
