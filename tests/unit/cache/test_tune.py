"""Choosing the threshold from labelled pairs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kefu.cache.tune import Pair, Scored, TuneError, choose, evaluate, read_pairs, render, score
from kefu.knowledge.embedder import StaticEmbedder


def scored(distance: float, same: bool, guard_ok: bool = True) -> Scored:
    return Scored(Pair(f"q{distance}", f"c{distance}", same), distance, guard_ok, None)


def test_choose_takes_the_largest_threshold_meeting_the_target() -> None:
    pairs = [
        scored(0.01, True),
        scored(0.02, True),
        scored(0.03, False, guard_ok=False),  # the guard refuses it: no harm
        scored(0.04, True),
        scored(0.05, False),  # first wrong answer served
        scored(0.06, True),
    ]
    point = choose(pairs, 1.0)
    assert point is not None
    assert 0.04 <= point.threshold < 0.05  # halfway to the next pair, rounded down
    assert (point.served, point.precision, point.recall) == (3, 1.0, 0.75)
    bare = choose(pairs, 1.0, guard=False)
    assert bare is not None
    assert 0.02 <= bare.threshold < 0.03
    # All six served at 0.06 (guard off): 4 of 6 right. With the guard, 4 of 5 = 0.8.
    loose = choose(pairs, 0.8)
    assert loose is not None
    assert loose.threshold >= 0.06
    assert loose == evaluate(pairs, loose.threshold)
    assert (loose.served, loose.precision, loose.recall) == (5, 0.8, 1.0)


def test_no_threshold_when_the_nearest_pair_is_wrong() -> None:
    pairs = [scored(0.01, False), scored(0.02, True)]
    assert choose(pairs, 0.98) is None
    report, chosen = render(pairs, 0.98)
    assert chosen is None
    assert "no threshold reaches precision 0.98" in report


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_read_pairs(tmp_path: Path) -> None:
    text = "question,cached_question,same,lang,note\na,b,1,en,x\nc,d,0,zh,\n"
    path = write(tmp_path / "l.csv", text)
    assert read_pairs(path) == [Pair("a", "b", True, "en"), Pair("c", "d", False, "zh")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("question,same\na,1\n", "line 1: missing column(s) cached_question"),
        ("question,cached_question,same\na,b,1\nc,d,maybe\n", "line 3: same must be 1 or 0"),
        ("question,cached_question,same\na,,1\n", "line 2: empty question"),
        ("question,cached_question,same\n", "no labelled pairs"),
    ],
)
def test_bad_files_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TuneError, match=re.escape(message)):
        read_pairs(write(tmp_path / "bad.csv", text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TuneError, match="cannot read"):
        read_pairs(tmp_path / "none.csv")


def test_score_embeds_and_guards(embedder: StaticEmbedder) -> None:
    pairs = [
        Pair("can you deliver to Singapore?", "do you deliver to Singapore?", True),
        Pair("do you deliver to Malaysia?", "do you deliver to Singapore?", False),
        Pair("Do you deliver to Singapore", "do you deliver to Singapore?", True),
    ]
    paraphrase, malaysia, exact = score(pairs, embedder)
    assert paraphrase.guard_ok
    assert 0 < paraphrase.distance < 0.1
    assert not malaysia.guard_ok
    assert malaysia.reason == "places differ: malaysia vs singapore"
    assert (exact.distance, exact.guard_ok) == (0.0, True)
    report, chosen = render([paraphrase, malaysia, exact], 0.98)
    assert chosen is not None
    assert chosen.recall == 1.0
    assert f"--cache-threshold {chosen.threshold:.4f}" in report
    assert "without the guard" in report
