"""Learning from traffic: the fast path's coverage as reviewed misses become phrasings.

For each knowledge base under ``data/kbs/<name>/``, served as a new user gets it
(``kefu kb import kb.csv``, one question per answer, then ``kefu serve --engine fake
--no-answer-cache`` with the defaults):

1. **traffic**: the other phrasings of ``kb10.csv`` (customers' wording of the same
   answers, neither the evaluation messages nor ``kb.csv``), shuffled with a fixed seed,
   sent in batches as first turns of new sessions;
2. **review**: after each batch, the open misses (``misses.db``, what the server
   declined) are reviewed as a person with the traffic's labels would: a miss whose
   message has a known answer is accepted as a question of that answer's entry
   (``kefu.knowledge.review.accept``, what ``kefu kb misses accept`` runs), any
   other is rejected; the running server picks the change up and fits its
   calibration again in the background;
3. **curve**: at 0, 25, 50, 100, ... accepted misses, once ``/ready`` shows the
   calibration of that state of the knowledge base, the evaluation messages are sent
   (``--eval dev``: ``dev.csv``, tuning; ``--eval test``: the held-out ``test.csv``,
   read once per change, at the end) and coverage and precision are printed beside the
   calibration's expectation and the e5 peer (multilingual-e5-small's nearest question
   of the knowledge base as it is then, with the threshold that gives it the most
   coverage at the promised precision on these very messages).

The evaluation messages go through the same server, so they land in the miss log too;
the reviewer never accepts them (they are not traffic). The figures are printed, never
judged: the exit status is 1 only when requests failed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from answer_quality import Reply, post_chat
from harness import kefu_server
from kb_quality import KBS, Row, peer_coverage, read_csv
from kefu.calibration.probes import fingerprint
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.entries import answer_key
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.knowledge.review import accept
from kefu.knowledge.second_look import E5Transformer

CONCURRENCY = 4
CALIBRATION_WAIT = 900.0
# The server writes what it declined every refresh round (2 s).
FLUSH_WAIT = 3.0


@dataclass
class Point:
    reviewed: int  # misses accepted so far
    entries: int
    coverage: float
    precision: float
    served: int
    expected_precision: float
    expected_coverage: float
    peer: float  # e5 peer's coverage at the promised precision
    failed: int


async def ask_all(client: httpx.AsyncClient, url: str, messages: Sequence[str]) -> list[Reply]:
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(message: str) -> Reply:
        async with limit:
            return await post_chat(client, url, message)

    return list(await asyncio.gather(*(one(m) for m in messages)))


async def wait_calibrated(client: httpx.AsyncClient, url: str, prints: str) -> dict[str, Any]:
    """The calibration of the knowledge base with fingerprint ``prints``, once fitted."""
    start = time.perf_counter()
    while time.perf_counter() - start < CALIBRATION_WAIT:
        body = (await client.get(url + "/ready")).json()
        calibration: dict[str, Any] = body.get("knowledge_base", {}).get("calibration", {})
        if calibration.get("state") == "calibrated" and calibration.get("fingerprint") == prints:
            return calibration
        await asyncio.sleep(1.0)
    raise SystemExit(f"no calibration of {prints} after {CALIBRATION_WAIT:.0f} s")


class Peer:
    """multilingual-e5-small's nearest question with a threshold, on the knowledge base
    as it is at each point of the curve."""

    def __init__(self, model: E5Transformer, rows: Sequence[Row]) -> None:
        self.model = model
        self.rows = rows
        self.messages = model.embed_queries([row.message for row in rows])
        self._vectors: dict[str, np.ndarray] = {}

    def coverage(self, questions: Sequence[tuple[str, str]], precision: float) -> float:
        todo = [q for q, _ in questions if q not in self._vectors]
        if todo:
            self._vectors.update(zip(todo, self.model.embed_queries(todo), strict=True))
        matrix = np.stack([self._vectors[q] for q, _ in questions])
        similarities = self.messages @ matrix.T
        best = similarities.argmax(axis=1)
        cosine = similarities[np.arange(len(best)), best]
        right = np.array(
            [questions[b][1] == row.expected for b, row in zip(best, self.rows, strict=True)]
        )
        paraphrases = sum(row.kind == "paraphrase" for row in self.rows)
        return peer_coverage(cosine, right, paraphrases, precision)[0]


def load(kb_dir: Path, split: str) -> tuple[list[Row], list[tuple[str, str]]]:
    """The evaluation rows, and the traffic: (message, the question of kb.csv it asks)."""
    base = read_csv(kb_dir / "kb.csv")
    answers = {r["question"].strip(): answer_key(r["answer"]) for r in base}
    first = {answer_key(r["answer"]): r["question"].strip() for r in base}
    rows = []
    for r in read_csv(kb_dir / f"{split}.csv"):
        expected = r["expected_question"].strip()
        rows.append(Row(r["lang"], r["kind"], r["message"], answers.get(expected)))
    evaluated = {row.message.strip().lower() for row in rows}
    traffic = [
        (r["question"].strip(), first[answer_key(r["answer"])])
        for r in read_csv(kb_dir / "kb10.csv")
        if r["question"].strip() not in answers
        and r["question"].strip().lower() not in evaluated
        and answer_key(r["answer"]) in first
    ]
    return rows, traffic


def measure(
    rows: Sequence[Row], replies: Sequence[Reply], answers: dict[str, str]
) -> tuple[float, float, int, int]:
    paraphrases = sum(row.kind == "paraphrase" for row in rows)
    served = right = failed = 0
    for row, reply in zip(rows, replies, strict=True):
        failed += reply.error is not None
        if reply.tier != "faq":
            continue
        served += 1
        question = str((reply.source or {}).get("question") or "")
        right += row.expected is not None and answers.get(question) == row.expected
    precision = right / served if served else float("nan")
    return right / max(paraphrases, 1), precision, served, failed


def entries_now(data_dir: Path) -> tuple[list[tuple[str, str]], str, dict[str, str]]:
    """The FAQ questions with their answer keys, the fingerprint, and question -> entry id."""
    kb = KnowledgeBase.open(data_dir / "knowledge.db", StaticEmbedder())
    try:
        entries = kb.entries()
    finally:
        kb.close()
    faqs = [(e.question, answer_key(e.answer)) for e in entries if e.kind == "faq"]
    return faqs, fingerprint(entries), {e.question: e.id for e in entries}


async def learn(
    name: str,
    split: str,
    checkpoints: Sequence[int],
    batch: int,
    precision: float,
    peer_model: E5Transformer,
) -> list[Point]:
    kb_dir = KBS / name
    rows, traffic = load(kb_dir, split)
    random.Random(24).shuffle(traffic)
    labels = {message.strip().lower(): question for message, question in traffic}
    peer = Peer(peer_model, rows)
    points: list[Point] = []
    with tempfile.TemporaryDirectory(prefix="kefu-learn-") as tmp:
        data_dir = Path(tmp)
        await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "kefu",
                "kb",
                "import",
                "--data-dir",
                tmp,
                str(kb_dir / "kb.csv"),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        flags = ["--engine", "fake", "--no-answer-cache", "--faq-precision", str(precision)]
        with kefu_server(*flags, data_dir=data_dir) as url:
            async with httpx.AsyncClient(timeout=120) as client:
                accepted = sent = 0
                for checkpoint in checkpoints:
                    while accepted < checkpoint and sent < len(traffic):
                        chunk = traffic[sent : sent + batch]
                        sent += len(chunk)
                        await ask_all(client, url, [message for message, _ in chunk])
                        await asyncio.sleep(FLUSH_WAIT)
                        accepted += review(data_dir, labels, checkpoint - accepted)
                    if points and points[-1].reviewed == accepted:
                        break  # the traffic ran out before this point
                    faqs, prints, _ = entries_now(data_dir)
                    calibration = await wait_calibrated(client, url, prints)
                    replies = await ask_all(client, url, [row.message for row in rows])
                    answers = dict(faqs)
                    coverage, measured, served, failed = measure(rows, replies, answers)
                    point = Point(
                        accepted,
                        len(faqs),
                        coverage,
                        measured,
                        served,
                        float(calibration.get("expected_precision", float("nan"))),
                        float(calibration.get("expected_coverage", float("nan"))),
                        peer.coverage(faqs, precision),
                        failed,
                    )
                    points.append(point)
                    print(_row(name, point), flush=True)
                    # The evaluation's own misses are never reviewed.
                    settle_evaluation(data_dir, labels)
    return points


def review(data_dir: Path, labels: dict[str, str], room: int) -> int:
    """The reviewer: accept (up to ``room``) misses whose message asks a known question,
    as a question of that question's entry. Returns how many were accepted."""
    _, _, ids = entries_now(data_dir)
    log = MissLog(data_dir / MISSES_FILE)
    kb = KnowledgeBase.open(data_dir / "knowledge.db", StaticEmbedder())
    took = 0
    try:
        for miss in log.top(10_000):
            question = labels.get(miss.message.strip().lower())
            if question is None:
                continue  # not traffic (an evaluation message): left alone
            if took >= room:
                break
            accept(kb, log, miss.id, ids[question])
            took += 1
    finally:
        kb.close()
        log.close()
    return took


def settle_evaluation(data_dir: Path, labels: dict[str, str]) -> None:
    """Reject the misses the evaluation messages left, so the reviewer never sees them."""
    time.sleep(FLUSH_WAIT)
    log = MissLog(data_dir / MISSES_FILE)
    try:
        ids = [m.id for m in log.top(10_000) if m.message.strip().lower() not in labels]
        if ids:
            log.settle(ids, "rejected")
    finally:
        log.close()


def _row(name: str, p: Point) -> str:
    return (
        f"| {name} | {p.reviewed} | {p.entries} | {p.coverage:.1%} | {p.precision:.1%} "
        f"({p.served} served) | {p.expected_precision:.3f} at {p.expected_coverage:.3f} | "
        f"{p.peer:.1%} | {p.coverage / p.peer if p.peer else float('inf'):.2f}x |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kbs", default="telecom_en,bank_zh,saas_en", help="comma-separated names under data/kbs"
    )
    parser.add_argument(
        "--eval",
        choices=("dev", "test"),
        default="dev",
        help="the messages of the curve: dev.csv (tuning) or test.csv (held out: once, at the end)",
    )
    parser.add_argument(
        "--points", default="0,25,50,100,200", help="accepted misses at which to measure"
    )
    parser.add_argument("--batch", type=int, default=40, help="traffic messages per batch")
    parser.add_argument("--faq-precision", type=float, default=0.95, help="as kefu serve's flag")
    args = parser.parse_args(argv)
    checkpoints = [int(p) for p in args.points.split(",")]
    model = E5Transformer()
    print(
        f"eval: {args.eval}.csv; promised precision {args.faq_precision:.0%}\n"
        "| KB | reviewed misses accepted | FAQ questions | coverage | precision | "
        "calibration expected (precision at coverage) | e5 peer at the promised precision "
        "| ratio |\n"
        "|---|---|---|---|---|---|---|---|",
        flush=True,
    )
    failed = 0
    for name in args.kbs.split(","):
        points = asyncio.run(
            learn(name, args.eval, checkpoints, args.batch, args.faq_precision, model)
        )
        failed += sum(p.failed for p in points)
    if failed:
        print(f"{failed} requests failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
