"""``kefu cache``: list and evict cached answers, export lookups, tune the threshold.

The server holds the same SQLite file open; it notices changes made here in its next
refresh round (``AnswerCache.refresh``; one starts 2 s after the last ended), so an
eviction takes effect without a restart.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from kefu.cache.answers import AnswerCache
from kefu.cache.tune import TuneError, read_pairs, render, score
from kefu.commands.data_dir import chosen_data_dir, data_dir_option
from kefu.settings import SettingsError

CACHE_FILE = "cache.db"
EXIT_BAD_INPUT = 2


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "cache",
        help="inspect and evict cached answers, export lookups, tune the threshold",
        description="Administer the answer cache in DATA_DIR/cache.db. A running server "
        "sees evictions at its next refresh round, a few seconds at most.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    data_dir = data_dir_option()

    listing = actions.add_parser("list", parents=[data_dir], help="list live cached answers")
    listing.add_argument("--scope", help="only this scope (persona hash:tenant)")
    listing.add_argument("--json", action="store_true", help="print JSON, answers in full")
    listing.set_defaults(run=run_list)

    evict = actions.add_parser("evict", parents=[data_dir], help="remove cached answers")
    evict.add_argument("ids", nargs="*", metavar="ID", help="entry ids (from `kefu cache list`)")
    evict.add_argument("--scope", help="every entry of this scope")
    evict.add_argument("--all", action="store_true", help="every entry")
    evict.add_argument("--expired", action="store_true", help="expired entries left in the file")
    evict.set_defaults(run=run_evict)

    lookups = actions.add_parser(
        "lookups", parents=[data_dir], help="recent lookups with the nearest cached question"
    )
    lookups.add_argument("--limit", type=int, default=1000, help="most recent N lookups")
    lookups.add_argument(
        "--csv",
        action="store_true",
        help="CSV question,cached_question,distance,served,... to label (add a `same` column)",
    )
    lookups.set_defaults(run=run_lookups)

    tune = actions.add_parser(
        "tune",
        help="pick the distance threshold for a target precision from labelled pairs",
        description="Read LABELLED.csv (header question,cached_question,same; same is 1 or "
        "0; other columns ignored, a `lang` column gets a breakdown), embed both sides, "
        "apply the entity guard and print precision and recall per threshold, with and "
        "without the guard. Exit status: 0 a threshold was chosen, 1 none reaches the "
        "target, 2 the file is unusable.",
    )
    tune.add_argument("labelled", type=Path, metavar="LABELLED.csv")
    tune.add_argument("--target-precision", type=float, default=0.98, help="default 0.98")
    tune.set_defaults(run=run_tune)


def _cache_file(args: argparse.Namespace) -> Path:
    return chosen_data_dir(args) / CACHE_FILE


def _open(args: argparse.Namespace) -> AnswerCache | None:
    path = _cache_file(args)
    if not path.exists():
        print(f"no answer cache at {path}", file=sys.stderr)
        return None
    # Threshold and TTL only matter to lookups and puts, which this command never makes.
    return AnswerCache(path, threshold=0.0, ttl=1.0)


class _NoCache(Exception):
    """Nothing to read: the exit status says why (no file: 0, bad settings: 2)."""

    def __init__(self, status: int) -> None:
        self.status = status


@contextmanager
def _opened(args: argparse.Namespace) -> Iterator[AnswerCache]:
    try:
        cache = _open(args)
    except SettingsError as exc:
        print(f"kefu cache: error: {exc}", file=sys.stderr)
        raise _NoCache(EXIT_BAD_INPUT) from None
    if cache is None:
        raise _NoCache(0)
    try:
        yield cache
    finally:
        cache.close()


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _ago(seconds: float) -> str:
    seconds = abs(seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def run_list(args: argparse.Namespace) -> int:
    try:
        with _opened(args) as cache:
            entries = cache.entries(args.scope)
    except _NoCache as none:
        return none.status
    if args.json:
        print(json.dumps([asdict(e) for e in entries], ensure_ascii=False, indent=2))
        return 0
    now = time.time()
    print(f"{'id':<16}  {'scope':<16} {'hits':>5} {'age':>5} {'expires':>7}  question -> answer")
    for e in entries:
        print(
            f"{e.id:<16}  {_clip(e.scope, 16):<16} {e.hits:>5} {_ago(now - e.created_at):>5} "
            f"{'in ' + _ago(e.expires_at - now):>7}  {_clip(e.question, 48)} -> "
            f"{_clip(e.answer, 60)}"
        )
    print(f"{len(entries)} live entries")
    return 0


def run_evict(args: argparse.Namespace) -> int:
    chosen = sum([bool(args.ids), args.scope is not None, args.all, args.expired])
    if chosen != 1:
        print("kefu cache evict: give IDs, or one of --scope, --all, --expired", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        with _opened(args) as cache:
            if args.expired:
                count = cache.purge_expired()
            else:
                count = cache.evict(ids=args.ids, scope=args.scope, everything=args.all)
    except _NoCache as none:
        return none.status
    print(f"evicted {count} entr{'y' if count == 1 else 'ies'}")
    return 0


def run_lookups(args: argparse.Namespace) -> int:
    try:
        with _opened(args) as cache:
            records = [r for r in cache.lookups(args.limit) if r.nearest is not None]
    except _NoCache as none:
        return none.status
    if args.csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["question", "cached_question", "distance", "served", "kind", "rejected"])
        for r in records:
            served = int(r.kind != "miss")
            distance = f"{r.distance:.4f}" if r.distance is not None else ""
            writer.writerow([r.question, r.nearest, distance, served, r.kind, r.rejected or ""])
        return 0
    print(f"{'distance':>8}  {'kind':<8}  question ~ cached question  [why not served]")
    for r in records:
        distance = f"{r.distance:.4f}" if r.distance is not None else "-"
        why = f"  [{r.rejected}]" if r.rejected else ""
        print(
            f"{distance:>8}  {r.kind:<8}  {_clip(r.question, 50)} ~ "
            f"{_clip(r.nearest or '', 50)}{why}"
        )
    return 0


def run_tune(args: argparse.Namespace) -> int:
    if not 0 < args.target_precision <= 1:
        print("kefu cache tune: --target-precision must be in (0, 1]", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        pairs = read_pairs(args.labelled)
    except TuneError as exc:
        print(f"kefu cache tune: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from kefu.knowledge.embedder import StaticEmbedder

    report, chosen = render(score(pairs, StaticEmbedder()), args.target_precision)
    print(report)
    return 0 if chosen is not None else 1
