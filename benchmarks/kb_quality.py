"""The fast path on a shop's own knowledge base, as a new user gets it, beside its peer.

For each knowledge base under ``data/kbs/<name>/`` (``kb.csv``: one question per
answer; ``kb10.csv``: the same answers with up to ten phrasings; ``test.csv``:
``lang,kind,message,expected_question`` written by someone who saw only kb.csv, held
out; ``dev.csv``: the same form, for tuning, ``--split dev``) and each of K=1 and K=10:

1. ``kefu kb import`` into a fresh data dir, then ``kefu serve --engine fake`` on it
   with the defaults (but ``--no-answer-cache``: the cache keeps the fake engine's
   replies, and the knowledge base's decision is what is judged), waiting until
   ``/ready`` shows the decision fitted to the knowledge base's own labels;
2. every test message as the first turn of a new session: **served** when the reply
   came from the knowledge base (tier faq), **right** when its source answers the
   expected question (the same answer), wrong otherwise (a near miss or an
   out-of-scope message served is wrong);
3. coverage = right / paraphrases, precision = right / served, beside the precision
   promised (``--faq-precision``) and what the decision stood on (its threshold, who set
   it, the labels' lower bound there);
4. the peer, in this process: multilingual-e5-small's nearest knowledge-base question
   with a threshold on its cosine. Its threshold is chosen on the test messages
   themselves (the generous comparison): its coverage at kefu's measured precision,
   and at the promised one, and the ratio.

``make_demo_kbs.py`` writes the demo shop in this form (``demo_dev``, a tuning set).
The figures are printed, never judged: the exit status is 1 only when requests failed.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
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
from kefu.knowledge.entries import answer_key
from kefu.knowledge.second_look import E5Transformer

KBS = Path(__file__).parent / "data" / "kbs"
# The shop FAQs made from public sets by ``public_kbs.py`` (not kept in git).
PUBLIC = Path(__file__).parent / "data" / "public"


def kb_dir(name: str) -> Path:
    """A team KB under ``data/kbs``, else a public set under ``data/public``."""
    own = KBS / name
    return own if own.exists() or not (PUBLIC / name).exists() else PUBLIC / name


CALIBRATION_WAIT = 600.0
CONCURRENCY = 4


@dataclass
class Row:
    lang: str
    kind: str
    message: str
    expected: str | None  # the answer key that is right; None: nothing should answer


@dataclass
class Result:
    name: str
    k: int
    rows: list[Row]
    replies: list[Reply]
    answers: dict[str, str]  # question -> answer key, over the imported file
    calibration: dict[str, Any]
    calibrated_after: float

    def right(self, row: Row, reply: Reply) -> bool:
        if reply.tier != "faq" or not reply.source or row.expected is None:
            return False
        question = str(reply.source.get("question") or "")
        return self.answers.get(question) == row.expected


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def load_rows(kb_dir: Path, answers: dict[str, str], split: str = "test") -> list[Row]:
    rows = []
    for r in read_csv(kb_dir / f"{split}.csv"):
        expected = r["expected_question"].strip()
        if expected and expected not in answers:
            print(f"  warning: expected question not in kb.csv: {expected[:60]!r}")
        key = answers.get(expected) if expected else None
        rows.append(Row(r["lang"], r["kind"], r["message"], key))
    return rows


async def wait_calibrated(client: httpx.AsyncClient, url: str) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    while time.perf_counter() - start < CALIBRATION_WAIT:
        body = (await client.get(url + "/ready")).json()
        calibration = body.get("knowledge_base", {}).get("decision", {})
        if calibration.get("state") == "fitted":
            return calibration, time.perf_counter() - start
        await asyncio.sleep(1.0)
    raise SystemExit(f"no calibration after {CALIBRATION_WAIT:.0f} s")


async def ask_all(url: str, rows: Sequence[Row]) -> tuple[dict[str, Any], float, list[Reply]]:
    limit = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=120) as client:
        calibration, after = await wait_calibrated(client, url)

        async def one(row: Row) -> Reply:
            async with limit:
                return await post_chat(client, url, row.message)

        return calibration, after, list(await asyncio.gather(*(one(row) for row in rows)))


def run_kb(name: str, k: int, flags: Sequence[str], split: str = "test") -> Result:
    folder = kb_dir(name)
    kb_file = folder / ("kb.csv" if k == 1 else f"kb{k}.csv")
    base = {r["question"].strip(): answer_key(r["answer"]) for r in read_csv(folder / "kb.csv")}
    answers = base | {r["question"].strip(): answer_key(r["answer"]) for r in read_csv(kb_file)}
    rows = load_rows(folder, base, split)
    with tempfile.TemporaryDirectory(prefix="kefu-kbq-") as tmp:
        data_dir = Path(tmp)
        subprocess.run(
            [sys.executable, "-m", "kefu", "kb", "import", "--data-dir", tmp, str(kb_file)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        flags = ["--engine", "fake", "--no-answer-cache", *flags]
        with kefu_server(*flags, data_dir=data_dir) as url:
            calibration, after, replies = asyncio.run(ask_all(url, rows))
    return Result(name, k, rows, replies, answers, calibration, after)


def peer(result: Result, model: E5Transformer, kb_file: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per message: the e5 nearest question's cosine, and whether its answer is right
    (False for a message nothing should answer)."""
    kb = read_csv(kb_file)
    questions = model.embed_queries([r["question"] for r in kb])
    keys = [answer_key(r["answer"]) for r in kb]
    messages = model.embed_queries([row.message for row in result.rows])
    similarities = messages @ questions.T
    best = similarities.argmax(axis=1)
    cosine = similarities[np.arange(len(best)), best]
    right = np.array([keys[b] == row.expected for b, row in zip(best, result.rows, strict=True)])
    return cosine, right


def peer_coverage(
    cosine: np.ndarray, right: np.ndarray, paraphrases: int, precision: float
) -> tuple[float, float]:
    """The best coverage a threshold on the cosine reaches at ``precision`` or more on
    these messages, and that threshold."""
    best, chosen = 0.0, float("nan")
    for t in np.unique(cosine):
        served = cosine >= t
        hits = int((served & right).sum())
        if served.sum() and hits / served.sum() >= precision and hits / paraphrases > best:
            best, chosen = hits / paraphrases, float(t)
    return best, chosen


def report(result: Result, model: E5Transformer, promised: float) -> dict[str, Any]:
    kb_file = kb_dir(result.name) / ("kb.csv" if result.k == 1 else f"kb{result.k}.csv")
    failed = sum(reply.error is not None for reply in result.replies)
    pairs = list(zip(result.rows, result.replies, strict=True))
    paraphrases = sum(row.kind == "paraphrase" for row in result.rows)
    served = sum(reply.tier == "faq" for _, reply in pairs)
    right = sum(result.right(row, reply) for row, reply in pairs)
    coverage = right / max(paraphrases, 1)
    precision = right / served if served else float("nan")
    print(
        f"\n== {result.name}, K={result.k}: {len(result.rows)} messages "
        f"({paraphrases} paraphrases), calibrated {result.calibrated_after:.0f} s after start"
    )
    expected = result.calibration
    print(
        f"  kefu      coverage {coverage:6.1%}  precision {precision:6.1%}  "
        f"(promised {promised:.0%}; serves at P(right) >= {expected.get('serves_at')}, "
        f"decided by {expected.get('decided_by')}, bound {expected.get('precision_lower_bound')}"
        f" on {expected.get('at_threshold')})  served {served}, right {right}"
    )
    for kind in ("paraphrase", "near_miss", "out_of_scope"):
        for lang in sorted({row.lang for row in result.rows}):
            mine = [(row, reply) for row, reply in pairs if row.kind == kind and row.lang == lang]
            if mine:
                s = sum(reply.tier == "faq" for _, reply in mine)
                r = sum(result.right(row, reply) for row, reply in mine)
                print(f"    {kind:12} {lang}: {len(mine):4d} messages, {s:4d} served, {r:4d} right")
    cosine, good = peer(result, model, kb_file)
    target = precision if served else promised
    peer_cov, peer_t = peer_coverage(cosine, good, paraphrases, target)
    peer_95, t95 = peer_coverage(cosine, good, paraphrases, promised)
    ratio = coverage / peer_cov if peer_cov else float("inf")
    print(
        f"  peer (e5 nearest question + best threshold on these messages): "
        f"coverage {peer_cov:6.1%} at precision >= {target:.1%} (cos >= {peer_t:.3f}); "
        f"{peer_95:6.1%} at >= {promised:.0%} (cos >= {t95:.3f})"
    )
    print(f"  ratio kefu / peer at kefu's precision: {ratio:.2f}x")
    if failed:
        print(f"  {failed} requests failed")
    return {
        "kb": result.name,
        "k": result.k,
        "coverage": coverage,
        "precision": precision,
        "peer_coverage": peer_cov,
        "peer_coverage_at_promised": peer_95,
        "ratio": ratio,
        "served": served,
        "right": right,
        "decided_by": expected.get("decided_by"),
        "failed": failed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kbs", default="telecom_en,bank_zh,saas_en", help="comma-separated names under data/kbs"
    )
    parser.add_argument(
        "--k", default="1,10", help="phrasings per answer: 1 (kb.csv), 10 (kb10.csv)"
    )
    parser.add_argument("--faq-precision", type=float, default=0.95, help="as kefu serve's flag")
    parser.add_argument(
        "--split",
        choices=("test", "dev"),
        default="test",
        help="the messages: test.csv (held out: read once per change, at the end) or "
        "dev.csv (tuning)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    flags = ["--faq-precision", str(args.faq_precision)]
    model = E5Transformer()
    figures = []
    for name in args.kbs.split(","):
        for k in (int(k) for k in args.k.split(",")):
            result = run_kb(name, k, flags, args.split)
            figures.append(report(result, model, args.faq_precision))
    promised = f"{args.faq_precision:.0%}"
    print(
        f"\n| KB | K | coverage | precision (promised {promised}) | peer coverage there | ratio |"
    )
    print("|---|---|---|---|---|---|")
    for f in figures:
        cells = [f["kb"], f["k"], f"{f['coverage']:.1%}", f"{f['precision']:.1%}"]
        cells += [f"{f['peer_coverage']:.1%}", f"{f['ratio']:.2f}x"]
        print("| " + " | ".join(map(str, cells)) + " |")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))
    return 1 if any(f["failed"] for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
