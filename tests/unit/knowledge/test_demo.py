"""The bundled demo knowledge base: kept apart from the evaluation, covered by the table."""

from __future__ import annotations

import csv
from pathlib import Path

from kefu.knowledge.base import demo_entries
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.text import is_cjk_word, normalize, words_of

DATA = Path(__file__).resolve().parents[3] / "benchmarks" / "data"


def test_no_evaluation_message_is_a_demo_question() -> None:
    # benchmarks/answer_quality.py measures paraphrases; a message that is a demo
    # question word for word is answered from a dict and would flatter the figures.
    messages: list[str] = []
    sets = sorted(DATA.glob("answer_quality*.csv"))
    assert len(sets) == 4
    for path in sets:
        with path.open(encoding="utf-8", newline="") as f:
            messages += [row["message"] for row in csv.DictReader(f)]
    with (DATA / "cache_pairs.csv").open(encoding="utf-8", newline="") as f:
        messages += [
            q for row in csv.DictReader(f) for q in (row["question"], row["cached_question"])
        ]
    questions = {normalize(entry.question) for entry in demo_entries()}
    assert [m for m in messages if normalize(m) in questions] == []


def test_every_latin_word_of_the_demo_is_in_the_table(static_embedder: StaticEmbedder) -> None:
    # A Chinese word the table lacks falls back to its characters; a Latin one would
    # be left out of the vector: run scripts/distill-embeddings after editing the demo.
    missing = {
        word
        for entry in demo_entries()
        for word in words_of(f"{entry.question}\n{entry.answer}")
        if not is_cjk_word(word) and not word.isdigit() and not static_embedder.rows_of(word)
    }
    assert not missing, f"run scripts/distill-embeddings; not in the table: {sorted(missing)[:10]}"
