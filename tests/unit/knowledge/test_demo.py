"""The bundled demo knowledge base: kept apart from the evaluation, covered by the table."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kefu import demo
from kefu.knowledge.embedder import StaticEmbedder
from kefu.text.normalize import normalize
from kefu.text.words import is_cjk_word, words_of

DATA = Path(__file__).resolve().parents[3] / "benchmarks" / "data"


def evaluation_sets() -> dict[str, list[str]]:
    """The messages of each answer_quality*.csv (benchmarks/answer_quality.py's splits)."""
    sets: dict[str, list[str]] = {}
    for path in sorted(DATA.glob("answer_quality*.csv")):
        with path.open(encoding="utf-8", newline="") as f:
            sets[path.name] = [row["message"] for row in csv.DictReader(f)]
    return sets


def test_no_evaluation_message_is_a_demo_question() -> None:
    # benchmarks/answer_quality.py measures paraphrases; a message that is a demo
    # question word for word is answered from a dict and would flatter the figures.
    sets = evaluation_sets()
    assert set(sets) == {
        "answer_quality.csv",
        "answer_quality_fresh.csv",
        "answer_quality_fresh2.csv",
        "answer_quality_fresh3.csv",
        "answer_quality_fresh4.csv",
    }
    messages = [message for found in sets.values() for message in found]
    with (DATA / "cache_pairs.csv").open(encoding="utf-8", newline="") as f:
        messages += [
            q for row in csv.DictReader(f) for q in (row["question"], row["cached_question"])
        ]
    questions = {normalize(entry.question) for entry in demo.entries()}
    assert [m for m in messages if normalize(m) in questions] == []


@pytest.mark.parametrize("held_out", ["answer_quality_fresh3.csv", "answer_quality_fresh4.csv"])
def test_a_held_out_set_repeats_no_message_of_the_others(held_out: str) -> None:
    # fresh3 and fresh4 were written after the others had been tuned on; a message shared
    # with them would not be held out. (The older sets share a few with each other.)
    sets = evaluation_sets()
    messages = sets.pop(held_out)

    def key(message: str) -> str:
        return normalize(message).rstrip("?!.？！。 ")

    others = {key(message) for found in sets.values() for message in found}
    assert [m for m in messages if key(m) in others] == []


def test_every_latin_word_of_the_demo_is_in_the_table(static_embedder: StaticEmbedder) -> None:
    # A Chinese word the table lacks falls back to its characters; a Latin one would
    # be left out of the vector: run scripts/distill-embeddings after editing the demo.
    missing = {
        word
        for entry in demo.entries()
        for word in words_of(f"{entry.question}\n{entry.answer}")
        if not is_cjk_word(word) and not word.isdigit() and not static_embedder.rows_of(word)
    }
    assert not missing, f"run scripts/distill-embeddings; not in the table: {sorted(missing)[:10]}"
