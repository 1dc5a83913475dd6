"""``kefu kb``: import, list, search and remove knowledge entries in a data dir, and
list the questions the knowledge base nearly answered (``misses``).

The CLI writes the same SQLite file the server reads; a running server notices
the change (KnowledgeBase.refresh) without a restart.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

from kefu.commands.data_dir import chosen_data_dir, data_dir_option
from kefu.commands.guard import EXIT_ERROR, guarded
from kefu.faq.command import register as register_faq
from kefu.knowledge.base import KB_FILE, KnowledgeBase
from kefu.knowledge.importers import SUFFIXES, parse_file
from kefu.knowledge.misses import MISSES_FILE, STATES, MissLog
from kefu.knowledge.review import accept, review


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "kb",
        help="manage the knowledge base (FAQ and passages the answers come from)",
        description="Import, list, search and remove knowledge entries, stored in "
        f"DATA_DIR/{KB_FILE}. A running kefu picks the changes up without a restart.",
    )
    kb = parser.add_subparsers(dest="kb_command", required=True, metavar="COMMAND")

    data_dir = data_dir_option()
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON instead of a table")

    imp = kb.add_parser(
        "import",
        parents=[data_dir],
        help="import entries from CSV, JSON, JSONL or Markdown files",
        description="Add or update entries (an entry is identified by its question: the same "
        "question again updates its answer). CSV: header question,answer[,category]. JSON: "
        "a list of {question, answer, category?, kind?}. JSONL: one such object per line. "
        "Markdown: each heading starts an entry; a heading ending in '?' is a question and "
        "the text below it the answer, other headings make passages. Every file is checked "
        "before anything is written.",
    )
    imp.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help=f"files ({', '.join(SUFFIXES)})"
    )
    imp.set_defaults(run=run_import)

    lst = kb.add_parser("list", parents=[data_dir, as_json], help="list the entries")
    lst.add_argument("--category", help="only entries of this category")
    lst.set_defaults(run=run_list)

    search = kb.add_parser(
        "search",
        parents=[data_dir, as_json],
        help="show the entries a message retrieves, with their scores",
        description="Hybrid retrieval as the server does it: score is the fused score in "
        "[0, 1], lexical the normalised BM25 part, dense the cosine similarity.",
    )
    search.add_argument("query", metavar="QUERY", help="the customer's message")
    search.add_argument("-k", type=int, default=5, help="how many entries to show")
    search.set_defaults(run=run_search)

    misses = kb.add_parser(
        "misses",
        parents=[data_dir, as_json],
        help="questions the knowledge base nearly answered (phrasings it lacks)",
        description="Messages whose best entry was an FAQ the server declined to serve "
        "verbatim (score, margin or the FAQ guard), most frequent first, with that entry and "
        "the reason. With --as-import FILE, write them as question,answer rows (the entry's "
        "answer) to check, correct or delete, then `kefu kb import FILE`; or review them "
        "here (ACTION: accept, reject, review).",
    )
    misses.add_argument("--limit", type=int, default=50, help="how many to show")
    misses.add_argument(
        "--as-import", type=Path, metavar="FILE", help="write a CSV for `kefu kb import`"
    )
    misses.add_argument("--clear", action="store_true", help="forget every miss kept so far")
    misses.add_argument(
        "--state",
        choices=STATES,
        default="open",
        help="list the open misses (default) or those already accepted or rejected",
    )
    misses.set_defaults(run=run_misses)
    _register_review(misses)

    remove = kb.add_parser("remove", parents=[data_dir], help="remove entries by id")
    remove.add_argument("ids", nargs="+", metavar="ID", help="entry ids (from kefu kb list)")
    remove.set_defaults(run=run_remove)

    register_faq(kb, [data_dir, as_json], _with_kb, stderr_bar)  # calibrate, stats


def _register_review(misses: argparse.ArgumentParser) -> None:
    """``kefu kb misses accept|reject|review``: a reviewed miss becomes a question of the
    entry that answers it (and the server's calibration is fitted again), or leaves."""
    # SUPPRESS: ``kefu kb misses --data-dir X accept 3`` keeps X (a sub-command's own
    # default would overwrite it).
    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument(
        "--data-dir",
        type=Path,
        default=argparse.SUPPRESS,
        help="folder of kefu's state (default: the data_dir setting, env KEFU_DATA_DIR)",
    )
    actions = misses.add_subparsers(dest="misses_command", metavar="ACTION")
    take = actions.add_parser(
        "accept",
        parents=[data_dir],
        help="add a miss as a question of the entry whose answer answers it",
        description="The miss's message becomes a new question with ENTRY_ID's answer "
        "(default: the entry the server found nearest, shown by `kefu kb misses`). A "
        "running server picks the change up and fits its calibration again.",
    )
    take.add_argument("miss_id", type=int, metavar="MISS_ID", help="the id `kefu kb misses` shows")
    take.add_argument("entry_id", nargs="?", metavar="ENTRY_ID", help="the entry to answer it")
    take.set_defaults(run=run_accept)
    drop = actions.add_parser(
        "reject",
        parents=[data_dir],
        help="mark misses that no entry answers as reviewed",
        description="They leave the open list; the knowledge base is not changed.",
    )
    drop.add_argument("miss_ids", nargs="+", type=int, metavar="MISS_ID")
    drop.set_defaults(run=run_reject)
    walk = actions.add_parser(
        "review",
        parents=[data_dir],
        help="go through the open misses one by one",
        description="Shows each open miss (most frequent first) with the entries nearest it; "
        "answer with a number to accept it as that entry's question, an entry id, r to "
        "reject, s to skip, q to stop.",
    )
    walk.add_argument("--limit", type=int, default=50, help="how many misses to go through")
    walk.set_defaults(run=run_review)


def _open(args: argparse.Namespace) -> KnowledgeBase:
    from kefu.knowledge.embedder import StaticEmbedder

    return KnowledgeBase.open(chosen_data_dir(args) / KB_FILE, StaticEmbedder())


def _with_kb(
    command: Callable[[argparse.Namespace, KnowledgeBase, Path], int],
) -> Callable[[argparse.Namespace], int]:
    @guarded("kb")
    def run(args: argparse.Namespace) -> int:
        kb = _open(args)
        try:
            return command(args, kb, chosen_data_dir(args))
        finally:
            kb.close()

    return run


def stderr_bar(label: str) -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


@guarded("kb")
def run_import(args: argparse.Namespace) -> int:
    parsed = [(path, parse_file(path)) for path in args.files]  # all checked before any write
    kb = _open(args)
    try:
        for path, entries in parsed:
            bar = stderr_bar(f"embedding {path.name}")
            change = kb.add(entries, progress=bar)
            print(
                f"imported {len(entries)} ({len(change.added)} added, "
                f"{len(change.updated)} updated) from {path}"
            )
    finally:
        kb.close()
    return 0


def short(text: str, width: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


@guarded("kb")
def run_list(args: argparse.Namespace) -> int:
    kb = _open(args)
    try:
        entries = kb.entries(category=args.category)
    finally:
        kb.close()
    if args.json:
        print(json.dumps([dataclasses.asdict(e) for e in entries], ensure_ascii=False, indent=2))
        return 0
    for e in entries:
        print(f"{e.id}  {e.kind:7}  {e.category or '-':12}  {short(e.question, 60)}")
    print(f"{len(entries)} entries", file=sys.stderr)
    return 0


@guarded("kb")
def run_search(args: argparse.Namespace) -> int:
    kb = _open(args)
    try:
        hits = kb.search(args.query, k=args.k)
    finally:
        kb.close()
    if args.json:
        rows = [
            {
                "score": h.score,
                "lexical": h.lexical,
                "dense": h.dense,
                **dataclasses.asdict(h.entry),
            }
            for h in hits
        ]
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return 0
    print(f"{'score':>6} {'lexical':>7} {'dense':>6}  {'id':12}  question")
    for h in hits:
        print(
            f"{h.score:6.3f} {h.lexical:7.3f} {h.dense:6.3f}  {h.entry.id}  "
            f"{short(h.entry.question, 60)}"
        )
    return 0


@guarded("kb")
def run_misses(args: argparse.Namespace) -> int:
    path = chosen_data_dir(args) / MISSES_FILE
    if not path.exists():
        print(f"no misses recorded yet at {path}", file=sys.stderr)
        return 0
    log = MissLog(path)
    try:
        if args.clear:
            print(f"forgot {log.clear()} misses")
            return 0
        found = log.top(args.limit, args.state)
    finally:
        log.close()
    if args.as_import is not None:
        with args.as_import.open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["question", "answer"])
            writer.writerows([m.message, m.answer] for m in found)
        print(f"wrote {len(found)} rows to {args.as_import}: check each answer, then import it")
        return 0
    if args.json:
        print(json.dumps([dataclasses.asdict(m) for m in found], ensure_ascii=False, indent=2))
        return 0
    print(f"{'id':>5} {'count':>5} {'score':>5}  message  ->  best entry  (why declined)")
    for m in found:
        print(
            f"{m.id:5d} {m.count:5d} {m.score:5.2f}  {short(m.message, 50)}  ->  "
            f"{short(m.question, 40)} [{m.entry_id}]  ({short(m.reason, 50)})"
        )
    if found and args.state == "open":
        print(
            "accept one as a question of an entry: kefu kb misses accept ID [ENTRY_ID]; "
            "reject: kefu kb misses reject ID...; one by one: kefu kb misses review",
            file=sys.stderr,
        )
    return 0


def _reviewing(
    command: Callable[[argparse.Namespace, KnowledgeBase, MissLog], int],
) -> Callable[[argparse.Namespace], int]:
    @guarded("kb")
    def run(args: argparse.Namespace) -> int:
        path = chosen_data_dir(args) / MISSES_FILE
        if not path.exists():
            print(f"no misses recorded yet at {path}", file=sys.stderr)
            return EXIT_ERROR
        log = MissLog(path)
        try:
            kb = _open(args)
            try:
                return command(args, kb, log)
            finally:
                kb.close()
        finally:
            log.close()

    return run


@_reviewing
def run_accept(args: argparse.Namespace, kb: KnowledgeBase, log: MissLog) -> int:
    added = accept(kb, log, args.miss_id, args.entry_id)
    print(f"added {added.id}  {short(added.question, 60)}  ->  {short(added.answer, 40)}")
    return 0


@guarded("kb")
def run_reject(args: argparse.Namespace) -> int:
    path = chosen_data_dir(args) / MISSES_FILE
    log = MissLog(path)
    try:
        log.settle(args.miss_ids, "rejected")
    finally:
        log.close()
    print(f"rejected {len(args.miss_ids)}")
    return 0


@_reviewing
def run_review(args: argparse.Namespace, kb: KnowledgeBase, log: MissLog) -> int:
    def ask(prompt: str) -> str:
        try:
            return input(prompt)
        except EOFError:
            return "q"

    done = review(kb, log, ask=ask, say=print, limit=args.limit)
    print(f"accepted {done['accepted']}, rejected {done['rejected']}, skipped {done['skipped']}")
    return 0


@guarded("kb")
def run_remove(args: argparse.Namespace) -> int:
    kb = _open(args)
    try:
        change = kb.remove(args.ids)
    finally:
        kb.close()
    for entry in change.removed:
        print(f"removed {entry.id}  {short(entry.question, 60)}")
    return 0
