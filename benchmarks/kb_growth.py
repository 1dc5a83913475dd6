"""How much the knowledge base learns from its misses: held-out answers before and after.

A shop's knowledge base grows from what its customers ask: ``kefu kb misses --as-import``
writes the messages the fast path nearly answered (the best entry was an FAQ that the
router or the FAQ guard declined) as question,answer rows to check and import. This
runs that loop once, with the project's own commands, on ``kefu serve --engine fake``
without the answer cache (only the knowledge base learns):

1. before: a server on a fresh data dir (the demo KB) answers the held-out splits;
2. traffic: another answers the ``--traffic`` splits, then stops (its miss log is
   flushed on the way out), and ``kefu kb misses --as-import`` exports the misses;
3. review, standing in for the operator by the data files' labels: a row whose message
   is a labelled paraphrase is kept with its expected entry's answer (corrected when
   the router had chosen another), any other row is deleted;
4. ``kefu kb import`` of the reviewed rows; after: the server restarts on that data dir
   and answers the held-out splits again.

No paraphrase of the traffic may be in a held-out split. The figures are printed, never
judged: the exit status is 1 only when requests failed.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import httpx

from answer_quality import DATA, Tally, answer_key, evaluate, load_csv, print_table
from harness import kefu_server
from kefu.text.normalize import normalize

SERVE_FLAGS = ("--engine", "fake", "--no-answer-cache")
# The rows of answer_quality.py's table that mean something without the cache.
FIGURES = (
    "retrieval",
    "e5 top-1",
    "either top-1",
    "answered",
    "routing",
    "false hits, messages",
    "wrong KB entry",
    "non-FAQ answered from KB",
)


def kefu(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "kefu", *args], check=True, stdout=subprocess.DEVNULL)


def answers_of(base_url: str) -> dict[str, str]:
    """Each KB question's answer, as the server lists them."""
    listing = httpx.get(base_url + "/kb", timeout=60)
    listing.raise_for_status()
    return {e["question"]: e["answer"] for e in listing.json()["entries"]}


def review(
    misses: Path, labelled: dict[str, dict[str, str]], answer_of: dict[str, str], out: Path
) -> dict[str, int]:
    """The operator's pass over the exported misses, by the labels; the counts of rows
    kept, corrected and deleted."""
    counts = {"kept": 0, "corrected": 0, "deleted": 0}
    with misses.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with out.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["question", "answer"])
        for row in rows:
            label = labelled.get(row["question"])
            if label is None or label["kind"] != "paraphrase":
                counts["deleted"] += 1
                continue
            right = answer_of[label["expected_question"]]
            counts["kept" if row["answer"] == right else "corrected"] += 1
            writer.writerow([row["question"], right])
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--traffic",
        default="fresh,fresh2",
        help="splits replayed as customer traffic, whose misses are imported (default: "
        "fresh,fresh2: long, realistic messages)",
    )
    parser.add_argument(
        "--held-out",
        default="fresh3,test",
        help="splits answered before and after the import (default: fresh3,test)",
    )
    args = parser.parse_args(argv)
    every_row = [row for path in sorted(DATA.glob("answer_quality*.csv")) for row in load_csv(path)]
    traffic_splits, held_splits = args.traffic.split(","), args.held_out.split(",")
    traffic = [r for r in every_row if r["split"] in traffic_splits]
    held = {name: [r for r in every_row if r["split"] == name] for name in held_splits}
    # Only paraphrases are imported: one that a held-out split asks too would be learnt.
    # Compared as the KB's word-for-word lookup compares them.
    taught = {normalize(r["message"]) for r in traffic if r["kind"] == "paraphrase"}
    shared = taught & {normalize(r["message"]) for rows in held.values() for r in rows}
    if shared:
        parser.error(f"the held-out splits ask {len(shared)} paraphrases of the traffic")
    key = answer_key(every_row)
    errors = 0

    def answer(url: str) -> dict[str, dict[str, Tally]]:
        nonlocal errors
        results = {}
        for name, rows in held.items():
            tallies, _, failed = asyncio.run(evaluate(url, rows, [], 0.0, key))
            results[name] = tallies
            errors += failed
        return results

    with tempfile.TemporaryDirectory(prefix="kefu-growth-") as work:
        data_dir, misses, reviewed = (
            Path(work) / "data",
            Path(work) / "misses.csv",
            Path(work) / "reviewed.csv",
        )
        print("before: the demo knowledge base answers the held-out splits", file=sys.stderr)
        with kefu_server(*SERVE_FLAGS) as url:
            before = answer(url)
        print(f"traffic: {len(traffic)} messages of {args.traffic}", file=sys.stderr)
        with kefu_server(*SERVE_FLAGS, data_dir=data_dir) as url:
            answer_of = answers_of(url)
            tallies, _, failed = asyncio.run(evaluate(url, traffic, [], 0.0, key))
            errors += failed
        kefu(
            "kb",
            "misses",
            "--data-dir",
            str(data_dir),
            "--limit",
            "1000000",
            "--as-import",
            str(misses),
        )
        labelled = {r["message"]: r for r in traffic}
        counts = review(misses, labelled, answer_of, reviewed)
        exported = sum(counts.values())
        if not exported:
            print("no misses were exported: nothing to learn", file=sys.stderr)
            return 1
        print(f"import: {exported} misses exported, {counts}", file=sys.stderr)
        kefu("kb", "import", str(reviewed), "--data-dir", str(data_dir))
        with kefu_server(*SERVE_FLAGS, data_dir=data_dir) as url:
            after = answer(url)

    print(f"\ntraffic ({args.traffic}, {len(traffic)} messages) answered by the demo KB:")
    print_table(tallies, FIGURES)
    print(
        f"\nmisses exported: {exported}; the review kept {counts['kept']}, corrected "
        f"{counts['corrected']} and deleted {counts['deleted']}; imported "
        f"{counts['kept'] + counts['corrected']}"
    )
    for name in held:
        for label, result in (("before", before), ("after", after)):
            print(f"\n{name}, {label} the import:")
            print_table(result[name], FIGURES)
    print("\nanswered from the KB (all languages), after / before:")
    for name in held:
        was, now = (r[name]["all"].counts.get("answered", [0, 0]) for r in (before, after))
        ratio = (now[0] / was[0]) if was[0] else float("nan")
        print(f"  {name}: {was[0]}/{was[1]} -> {now[0]}/{now[1]}  ({ratio:.2f}x)")
    print(f"\nrequest errors: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
