"""`kefu cache list | evict | lookups | tune` through the parser they register."""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kefu.cache.answers import AnswerCache
from kefu.commands.cache import register
from kefu.knowledge.embedder import Vectors

Embed = Callable[[str], Vectors]
SCOPE = AnswerCache.scope("persona", "shop-1")


def kefu_cache(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="kefu")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["cache", *argv])
    status: int = args.run(args)
    return status


@pytest.fixture
def data_dir(tmp_path: Path, embed: Embed) -> Path:
    cache = AnswerCache(tmp_path / "cache.db", threshold=0.2, ttl=3600)
    for question in ("do you deliver to Singapore?", "Can I pay by card?"):
        cache.put(SCOPE, question, f"answer to {question}", embed(question))
    cache.lookup(SCOPE, "do you deliver to Malaysia?", embed("do you deliver to Malaysia?"))
    cache.lookup(SCOPE, "Can I pay by card", embed("Can I pay by card"))
    cache.close()
    return tmp_path


def test_list(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kefu_cache("list", "--data-dir", str(data_dir)) == 0
    out = capsys.readouterr().out
    assert "do you deliver to Singapore?" in out
    assert "2 live entries" in out
    assert kefu_cache("list", "--data-dir", str(data_dir), "--json", "--scope", SCOPE) == 0
    entries = json.loads(capsys.readouterr().out)
    hits = {e["question"]: e["hits"] for e in entries}
    assert hits == {"do you deliver to Singapore?": 0, "Can I pay by card?": 1}


def test_data_dir_from_the_environment(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEFU_DATA_DIR", str(data_dir))
    assert kefu_cache("list") == 0
    assert "2 live entries" in capsys.readouterr().out


def test_evict(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kefu_cache("evict", "--data-dir", str(data_dir)) == 2  # nothing chosen
    assert kefu_cache("list", "--data-dir", str(data_dir), "--json") == 0
    capsys.readouterr()
    cache = AnswerCache(data_dir / "cache.db", threshold=0.2, ttl=3600)
    first = cache.entries()[0].id
    cache.close()
    assert kefu_cache("evict", first, "--data-dir", str(data_dir)) == 0
    assert "evicted 1 entry" in capsys.readouterr().out
    assert kefu_cache("evict", "--expired", "--data-dir", str(data_dir)) == 0
    assert "evicted 0 entries" in capsys.readouterr().out
    assert kefu_cache("evict", "--all", "--data-dir", str(data_dir)) == 0
    assert "evicted 1 entry" in capsys.readouterr().out


def test_no_cache_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kefu_cache("list", "--data-dir", str(tmp_path / "none")) == 0
    assert "no answer cache at" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()  # looking does not create it


def test_lookups_csv(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kefu_cache("lookups", "--csv", "--data-dir", str(data_dir)) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["question"], r["cached_question"], r["served"]) for r in rows] == [
        ("Can I pay by card", "Can I pay by card?", "1"),
        ("do you deliver to Malaysia?", "do you deliver to Singapore?", "0"),
    ]
    assert float(rows[1]["distance"]) > 0
    assert rows[1]["rejected"].startswith("places differ")
    assert kefu_cache("lookups", "--limit", "1", "--data-dir", str(data_dir)) == 0
    assert "Can I pay by card" in capsys.readouterr().out


def test_tune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = tmp_path / "labelled.csv"
    labelled.write_text(
        "question,cached_question,same\n"
        "can you ship to Singapore?,do you deliver to Singapore?,1\n"
        "do you deliver to Malaysia?,do you deliver to Singapore?,0\n"
        "能退货吗,可以退货吗,1\n"
        "不能退货吗,能退货吗,0\n",
        encoding="utf-8",
    )
    assert kefu_cache("tune", str(labelled), "--target-precision", "0.95") == 0
    out = capsys.readouterr().out
    assert "chosen threshold" in out
    assert "--cache-threshold" in out
    assert "KEFU_CACHE_THRESHOLD" in out


def test_tune_bad_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = tmp_path / "bad.csv"
    labelled.write_text("question,cached_question,same\na,b,yes please\n", encoding="utf-8")
    assert kefu_cache("tune", str(labelled)) == 2
    assert "line 2" in capsys.readouterr().err
    assert kefu_cache("tune", str(labelled), "--target-precision", "1.5") == 2
