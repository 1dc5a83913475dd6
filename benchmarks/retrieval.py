"""Knowledge-base retrieval: how fast search is at 10 000 entries, and how well it ranks.

Speed (default): a 10 000-entry knowledge base of synthetic entries, half English
and half Chinese, whose words are drawn (Zipf-weighted) from the demo FAQ's
vocabulary. Their dense vectors are RANDOM unit vectors from a stub embedder, so
no 10 000 embeddings are needed; a matrix-vector product costs the same whatever
the values. Queries are the real customer messages of data/answer_quality.csv,
passed with a precomputed query vector, so the figure excludes the query
embedding, which is timed on its own with the real StaticEmbedder (EN and ZH).
Baseline in the same run: BM25 by full scan (a Counter per document, no inverted
index), the textbook way; the lexical half alone of kefu's search is what it
replaces. (``bm25s`` is not installed, so it is not compared.)

Quality (--quality): the bundled demo FAQ with the real embedder; for each
paraphrase row, is the top hit the expected question; per language and split.
Also the top score of right answers against that of messages the KB must not
answer (near misses, out of scope, small talk), the figures a threshold comes from.

    .venv/bin/python benchmarks/retrieval.py [--entries 10000] [--queries 300]
    .venv/bin/python benchmarks/retrieval.py --quality
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness import percentile
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.bm25 import K1, B, entry_terms
from kefu.knowledge.embedder import StaticEmbedder, Vectors
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.importers import parse_file
from kefu.knowledge.text import normalize, tokens

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "src" / "kefu" / "knowledge" / "demo"
QUALITY = ROOT / "benchmarks" / "data" / "answer_quality.csv"
NEGATIVE_KINDS = ("near_miss", "out_of_scope", "smalltalk")


class RandomEmbedder:
    """Deterministic random unit vectors: the cost of the dense scan without the model."""

    dim = 384
    name = "random-unit"

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def _unit(self, n: int) -> Vectors:
        v = self._rng.standard_normal((n, self.dim)).astype(np.float32)
        return np.asarray(v / np.linalg.norm(v, axis=1, keepdims=True), dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._unit(len(texts))

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._unit(len(texts))


def demo_entries() -> list[KbEntry]:
    return [e for path in sorted(DEMO.glob("*.csv")) for e in parse_file(path)]


def rows() -> list[dict[str, str]]:
    with QUALITY.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def synthetic(n: int, seed: int = 1) -> list[KbEntry]:
    """n entries, alternately English and Chinese, words Zipf-weighted from the demo."""
    rng = random.Random(seed)
    vocab: dict[str, list[str]] = {"en": [], "zh": []}
    for entry in demo_entries():
        text = entry.question + " " + entry.answer
        if entry.lang == "en":
            vocab["en"].extend(text.lower().split())
        else:
            vocab["zh"].extend(ch for ch in text if not ch.isspace())
    words = {lang: [w for w, _ in Counter(ws).most_common()] for lang, ws in vocab.items()}
    weights = {lang: [1 / (r + 1) for r in range(len(ws))] for lang, ws in words.items()}
    out = []
    for i in range(n):
        lang = "en" if i % 2 == 0 else "zh"
        sep = " " if lang == "en" else ""
        draw = rng.choices(words[lang], weights[lang], k=rng.randint(40, 80))
        question = sep.join(draw[: rng.randint(6, 12)]) + f" {i}?"
        answer = sep.join(draw[12:])
        out.append(KbEntry.make(question, answer, category=f"c{i % 20}", source="synthetic"))
    return out


class NaiveBm25:
    """The baseline: every document scored for every query, no inverted index."""

    def __init__(self, entries: Sequence[KbEntry]) -> None:
        self.docs = [entry_terms(e.question, e.answer) for e in entries]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / len(self.docs)
        self.df: Counter[str] = Counter(t for d in self.docs for t in d)

    def top(self, query: str, k: int) -> list[int]:
        n = len(self.docs)
        terms = list(dict.fromkeys(tokens(query)))
        idf = {t: math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5)) for t in terms}
        scores = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            s = 0.0
            norm = K1 * (1 - B + B * length / self.avg)
            for t in terms:
                tf = doc.get(t, 0)
                if tf:
                    s += idf[t] * tf * (K1 + 1) / (tf + norm)
            scores.append(s)
        return sorted(range(n), key=scores.__getitem__, reverse=True)[:k]


def timed(fn: object, calls: Sequence[tuple[object, ...]]) -> list[float]:
    out = []
    for call in calls:
        t0 = time.perf_counter()
        fn(*call)  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1000)
    return out


def line(name: str, ms: Sequence[float]) -> str:
    return f"  {name:38} p50 {percentile(ms, 50):8.3f} ms   p99 {percentile(ms, 99):8.3f} ms"


def speed(args: argparse.Namespace) -> None:
    messages = [r["message"] for r in rows()]
    rng = random.Random(2)
    queries = [rng.choice(messages) for _ in range(args.queries)]
    entries = synthetic(args.entries)
    stub = RandomEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        kb = KnowledgeBase.open(Path(tmp) / "knowledge.db", stub)
        kb.add(entries)
        build = time.perf_counter() - t0
        vectors = stub.embed_queries(queries)
        calls = [(q, v) for q, v in zip(queries, vectors, strict=True)]
        print(
            f"{len(kb)} entries (random unit vectors), {len(queries)} queries; "
            f"built and stored in {build:.1f} s"
        )
        for q, v in calls[:20]:  # warm up
            kb.search(q, query_vector=v)
        hybrid = timed(lambda q, v: kb.search(q, query_vector=v, k=5), calls)
        faq = timed(lambda q, v: kb.search(q, query_vector=v, k=5, kind="faq"), calls)
        naive = NaiveBm25(entries)
        base = timed(
            lambda q: naive.top(q, 5), [(q,) for q in queries[: max(20, args.queries // 5)]]
        )
        extra = synthetic(args.entries + 50)[-50:]
        add_one = timed(lambda e: kb.add([e]), [(e,) for e in extra])
        remove_one = timed(lambda e: kb.remove([e.id]), [(e,) for e in extra])
        reopen = time.perf_counter()
        kb.close()
        kb = KnowledgeBase.open(Path(tmp) / "knowledge.db", stub)
        reopen_s = time.perf_counter() - reopen
        kb.close()
    print("search (excluding the query embedding):")
    print(line("kefu hybrid (BM25 + dense + fusion)", hybrid))
    print(line("kefu hybrid, kind=faq", faq))
    print(line("baseline: full-scan BM25 alone", base))
    print(f"  ratio baseline / kefu at p50: {percentile(base, 50) / percentile(hybrid, 50):.0f}x")
    print("changes at this size (SQLite commit included, embedding excluded):")
    print(line("add one entry (incremental)", add_one))
    print(line("remove one entry", remove_one))
    print(f"  reopen (load entries + vectors, build indexes): {reopen_s * 1000:.0f} ms")
    embedder = StaticEmbedder()
    by_lang = {lang: [r["message"] for r in rows() if r["lang"] == lang] for lang in ("en", "zh")}
    print("query embedding (StaticEmbedder):")
    for lang, texts in by_lang.items():
        embedder.embed_queries(texts[:5])
        ms = timed(lambda t: embedder.embed_queries([t]), [(t,) for t in texts[:150]])
        print(line(f"{lang} ({min(150, len(texts))} messages)", ms))


def quality(args: argparse.Namespace) -> None:
    data = rows()
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase.open(Path(tmp) / "knowledge.db", StaticEmbedder())
        kb.load_demo()
        print(f"demo knowledge base: {len(kb)} entries")
        right: list[float] = []
        wrong: list[float] = []
        negative: list[float] = []
        for split in ("dev", "test"):
            for lang in ("en", "zh"):
                cases = [r for r in data if r["split"] == split and r["lang"] == lang]
                ok = total = 0
                for r in cases:
                    hits = kb.search(r["message"], k=1)
                    top = hits[0].score if hits else 0.0
                    if r["kind"] == "paraphrase":
                        total += 1
                        hit = bool(hits) and normalize(hits[0].entry.question) == normalize(
                            r["expected_question"]
                        )
                        ok += hit
                        (right if hit else wrong).append(top)
                    elif r["kind"] in NEGATIVE_KINDS:
                        negative.append(top)
                print(f"  top-1 {lang} {split:4}: {ok / total:.3f} ({ok}/{total})")
        kb.close()
    print("top score (p10 / p50 / p90):")
    for name, values in (
        ("right top-1", right),
        ("wrong top-1", wrong),
        ("must not answer", negative),
    ):
        qs = " / ".join(f"{percentile(values, q):.3f}" for q in (10, 50, 90))
        print(f"  {name:16} {qs}   (n={len(values)})")
    print("serving the top hit at score >= t (all splits):")
    for t in (0.5, 0.6, 0.7, 0.8, 0.85, 0.9):
        served_right = sum(s >= t for s in right)
        false = sum(s >= t for s in wrong) + sum(s >= t for s in negative)
        precision = served_right / max(1, served_right + false)
        print(
            f"  t={t:.2f}: right {served_right:3}/{len(right) + len(wrong)}, "
            f"wrong or must-not {false:3}, precision {precision:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000, help="synthetic entries")
    parser.add_argument("--queries", type=int, default=300, help="timed search queries")
    parser.add_argument("--quality", action="store_true", help="top-1 accuracy on the demo")
    args = parser.parse_args()
    quality(args) if args.quality else speed(args)


if __name__ == "__main__":
    main()
