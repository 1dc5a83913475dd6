"""Write the demo shop as a shop's FAQ page for ``kb_quality.py`` (the tuning KB):
``benchmarks/data/kbs/demo/kb.csv`` (the first question of each answer),
``kb10.csv`` (up to ten), and ``test.csv`` from a split of ``answer_quality.csv``
(``--split dev`` by default: the split thresholds were tuned on; ``--split fresh``:
``answer_quality_fresh.csv``, customers' own wording, used for tuning too) in kb_quality's
columns, its expected questions mapped to kb.csv's question of the same answer.
Rows for the rules (orders, handoff, smalltalk) are left out: the KB decision is judged.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from kefu import demo
from kefu.knowledge.entries import answer_key

DATA = Path(__file__).parent / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--split", default="dev", help="dev, or fresh: answer_quality_fresh.csv")
    args = parser.parse_args()
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for entry in demo.entries():
        if entry.kind == "faq":
            row = (entry.question, entry.answer, entry.category or "")
            groups.setdefault(answer_key(entry.answer), []).append(row)
    out = DATA / "kbs" / f"demo_{args.split}"
    out.mkdir(parents=True, exist_ok=True)
    for name, k in (("kb.csv", 1), ("kb10.csv", 10)):
        with (out / name).open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["question", "answer", "category"])
            for rows in groups.values():
                writer.writerows(rows[:k])
    first = {key: rows[0][0] for key, rows in groups.items()}
    by_question = {row[0]: key for key, rows in groups.items() for row in rows}
    source_file = (
        "answer_quality.csv" if args.split == "dev" else f"answer_quality_{args.split}.csv"
    )
    with (DATA / source_file).open(encoding="utf-8") as f:
        source = [r for r in csv.DictReader(f) if r["split"] == args.split]
    with (out / "test.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["lang", "kind", "message", "expected_question"])
        for r in source:
            if r["kind"] not in ("paraphrase", "near_miss", "out_of_scope"):
                continue
            key = by_question.get(r["expected_question"])
            expected = first[key] if r["kind"] == "paraphrase" and key else ""
            if r["kind"] == "paraphrase" and not expected:
                continue
            writer.writerow([r["lang"], r["kind"], r["message"], expected])
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
