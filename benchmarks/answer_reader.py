"""Can the bundled model read an answer? Issue 24's wrong answers are near misses: a
message that keeps an entry's words and asks for something its answer does not say.
Telling them apart needs a reader of the (message, answer) pair. kefu bundles two
models: multilingual-e5-small (a 4-bit bi-encoder, inference only, so no cross-encoder
can be fine-tuned from it here) and SmolLM2-135M. This measures whether the 135M model
can be that reader, scored rather than asked to generate.

For each English test message of the knowledge bases given (``data/kbs/<name>/``: kb.csv,
test.csv), e5's nearest question picks the candidate entry, as the second look does.
Kept: paraphrases whose candidate is right, and near misses (whose candidate is wrong
by construction). For each, the model's pointwise mutual information between the
message and the candidate, per token of the message:

    (log P(message | the answer) - log P(message)) / tokens

and the same with the entry's question in place of its answer. Printed: the AUC of
each score (and of e5's cosine) for right candidates against near misses, over all
messages and over the half e5 ranks most similar, where the decision is made. 0.5 is
chance.

    cd benchmarks && ../.venv/bin/python answer_reader.py [--kbs energy_en,pharmacy_en,grocery_en]
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import llama_without_amx
from kefu.engine.bundled import bundled_model_path
from kefu.knowledge.second_look import E5Transformer

KBS = Path(__file__).parent / "data" / "kbs"
# No trailing space: it would merge into the message's first token.
ASKED = "The customer's question:"


@dataclass(frozen=True)
class Scored:
    right: bool  # a paraphrase whose candidate is its entry; False: a near miss
    cosine: float
    by_answer: float
    by_question: float


class Reader:
    """SmolLM2-135M's log-probabilities (loaded without AMX's repacked buffers, which
    crash in this VM: DESIGN.md)."""

    def __init__(self) -> None:
        path = str(bundled_model_path())
        self.llm = llama_without_amx(
            model_path=path, logits_all=True, n_ctx=1024, n_threads=2, verbose=False
        )

    def log_p(self, context: str, text: str) -> tuple[float, int]:
        """log P(text | context) and text's token count."""
        head = self.llm.tokenize(context.encode(), add_bos=True, special=False)
        whole = self.llm.tokenize((context + text).encode(), add_bos=True, special=False)
        if whole[: len(head)] != head:  # text's first token would be counted as context's
            raise ValueError(f"{text!r} does not begin a token after {context!r}")
        self.llm.reset()  # type: ignore[no-untyped-call]  # llama-cpp-python leaves it untyped
        self.llm.eval(whole)
        logits = np.asarray(self.llm.scores[: len(whole)], dtype=np.float64)
        log_p = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        total = sum(log_p[i - 1, whole[i]] for i in range(len(head), len(whole)))
        return float(total), len(whole) - len(head)

    def pmi(self, given: str, message: str) -> float:
        conditioned, tokens = self.log_p(f"{given}\n{ASKED}", f" {message}")
        alone, _ = self.log_p(ASKED, f" {message}")
        return (conditioned - alone) / max(tokens, 1)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as file:
        return list(csv.DictReader(file))


def score_kb(name: str, e5: E5Transformer, reader: Reader) -> list[Scored]:
    kb = read_csv(KBS / name / "kb.csv")
    tests = [
        row
        for row in read_csv(KBS / name / "test.csv")
        if row["lang"] == "en" and row["kind"] in ("paraphrase", "near_miss")
    ]
    questions = e5.embed_queries([row["question"] for row in kb])
    messages = e5.embed_queries([row["message"] for row in tests])
    scored = []
    for row, cosines in zip(tests, messages @ questions.T, strict=True):
        best = int(np.argmax(cosines))
        entry = kb[best]
        right = row["kind"] == "paraphrase" and entry["question"] == row["expected_question"]
        if row["kind"] == "paraphrase" and not right:
            continue  # retrieval's miss, not the reader's question
        by_answer = reader.pmi(f"Answer: {entry['answer']}", row["message"])
        by_question = reader.pmi(f"Question: {entry['question']}", row["message"])
        scored.append(Scored(right, float(cosines[best]), by_answer, by_question))
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return scored


def auc(right: Sequence[float], wrong: Sequence[float]) -> float:
    """P(a right candidate scores above a near miss), ties counting half."""
    a, b = np.asarray(right)[:, None], np.asarray(wrong)[None, :]
    return float((a > b).mean() + 0.5 * (a == b).mean())


def report(label: str, scored: Sequence[Scored]) -> None:
    right = [s for s in scored if s.right]
    wrong = [s for s in scored if not s.right]
    cells = []
    for field in ("cosine", "by_answer", "by_question"):
        value = auc([getattr(s, field) for s in right], [getattr(s, field) for s in wrong])
        cells.append(f"{value:11.3f}")
    print(f"{label:28} {len(right):5} {len(wrong):5} " + " ".join(cells))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kbs", default="energy_en,pharmacy_en,grocery_en")
    args = parser.parse_args(argv)
    e5, reader = E5Transformer(threads=2), Reader()
    scored: list[Scored] = []
    for name in args.kbs.split(","):
        scored += score_kb(name, e5, reader)
    print(
        f"{'AUC, right vs near miss':28} {'right':>5} {'near':>5} {'e5 cosine':>11} "
        f"{'PMI answer':>11} {'PMI question':>11}"
    )
    report("all", scored)
    middle = float(np.median([s.cosine for s in scored]))
    report("e5's most similar half", [s for s in scored if s.cosine >= middle])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
