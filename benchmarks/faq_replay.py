"""The FAQ decision in process, on a knowledge base and its messages: what it serves on
held-out messages, and how it learns from traffic through a judge.

For each knowledge base (``data/kbs/<name>`` or ``data/public/<name>``, made by
``public_kbs.py``) and K (1: ``kb.csv``; 10: ``kb10.csv``), imported into a fresh data
dir, every message goes through both looks once (``kefu.faq.fit.candidates``: the same
evidence, prior and language rule as serving), then:

- ``--mode test``: the decision fitted on the knowledge base's own labels (its phrasings
  held out; ``kefu.faq.labels.own_labels``) serves the ``test.csv`` messages: promised
  vs measured precision, coverage, and the e5 peer's (nearest question, best cosine
  threshold chosen on these very messages) coverage at the same precision.
- ``--mode replay``: ``dev.csv``, ``traffic.csv`` (public sets) and ``test.csv`` in
  random order as traffic. Each message is decided by the model of the moment; a
  declined message's candidates are judged (the LLM answered with them among its
  passages), a served one with ``kefu.faq.judge.explore``'s probability; the verdicts
  are labels, and the model is fitted again every ten verdicts, as the server does.
  Printed after every 100: the coverage and precision of what was served so far, and of
  the last 100. Judges:
  ``flip10`` (the truth, each verdict flipped with probability 0.1: a fallible judge,
  not an oracle) and ``smollm`` (the bundled SmolLM2-135M with the server's judge
  prompt, ``kefu.faq.judge.prompt``).
- ``--mode fallback``: the prior's conservative thresholds (``Prior.fallback``) from the
  pooled labelled messages of the knowledge bases named (the team's: dev and test, both
  tuning sets by now; a public set's: dev only),
  fixed-sequence Clopper-Pearson as a knowledge base's own labels are; ``--write``
  stores them in ``src/kefu/faq/static/prior.json``.

Nothing here is timed. Figures are printed, never judged.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kb_quality import kb_dir, peer_coverage, read_csv
from kefu.faq.bound import precision_lower_bound
from kefu.faq.fit import Candidate, Scored, candidates, fit, judged
from kefu.faq.judge import Judging, Judgment, Reliability, known_checks, prompt, verdict
from kefu.faq.labels import Label, own_labels
from kefu.faq.model import PRIOR_FILE, Curve, Model, load_prior
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.entries import answer_key
from kefu.knowledge.kb_words import read_texts
from kefu.knowledge.second_look import SECOND_LOOK_FILE, E5Transformer, Known, SecondLook
from kefu.service.fast_path import REFIT_EVERY

TARGETS = (0.8, 0.85, 0.9, 0.95, 0.97, 0.99)
EVERY = 100


@dataclass
class Message:
    text: str
    kind: str
    right: str | None  # the answer key that answers it
    found: list[Candidate]
    nearest: tuple[float, str] | None  # e5's nearest question: cosine, its answer key
    question: dict[str, tuple[str, str]]  # answer key -> (a question, the answer), for judges


@dataclass
class Seen:
    own: list[Label]
    own_scored: list[list[Scored]]
    splits: dict[str, list[Message]]
    checks: list[tuple[Judgment, bool]]  # the judge's known questions, as the server's
    keys: dict[str, str]  # a question of the knowledge base -> its answer key
    answers: dict[str, tuple[str, str]]  # answer key -> (a question, the answer)


@contextmanager
def imported(kb_file: Path, model: E5Transformer) -> Iterator[tuple[KnowledgeBase, SecondLook]]:
    """The file imported with ``kefu kb import`` into a fresh data dir, opened, read
    ahead and embedded, as a server would have it."""
    with tempfile.TemporaryDirectory(prefix="kefu-faq-") as tmp:
        subprocess.run(
            [sys.executable, "-m", "kefu", "kb", "import", "--data-dir", tmp, str(kb_file)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        kb = KnowledgeBase.open(Path(tmp) / "knowledge.db", StaticEmbedder())
        try:
            kb.prepare()
            kb.learn(read_texts(kb.unread(len(kb) * 4)))
            look = SecondLook(model, Path(tmp) / SECOND_LOOK_FILE)
            known = [Known.of(entry) for entry in kb.entries()]
            while look.sync(known, 256) > 0:
                pass
            yield kb, look
        finally:
            kb.close()


def see(name: str, k: int, model: E5Transformer, splits: Sequence[str], own: bool = True) -> Seen:
    folder = kb_dir(name)
    kb_file = folder / ("kb.csv" if k == 1 else f"kb{k}.csv")
    base = {r["question"].strip(): answer_key(r["answer"]) for r in read_csv(folder / "kb.csv")}
    with imported(kb_file, model) as (kb, look):
        entries = kb.entries()
        answers = {answer_key(e.answer): (e.question, e.answer) for e in entries}
        labels = own_labels(entries, name) if own else []
        vectors = model.embed_queries([label.text for label in labels])
        own_scored = [
            judged(label, candidates(kb, look, label.text, v, label.excluded))
            for label, v in zip(labels, vectors, strict=True)
        ]
        out: dict[str, list[Message]] = {}
        for split in splits:
            path = folder / f"{split}.csv"
            if not path.exists():
                continue
            rows = read_csv(path)
            vectors = model.embed_queries([r["message"] for r in rows])
            messages = []
            for r, v in zip(rows, vectors, strict=True):
                expected = r["expected_question"].strip()
                near = look.nearest(v)
                entry = None if near is None else kb.get(near.entry_id)
                nearest = None
                if near is not None and entry is not None:
                    nearest = (near.similarity, answer_key(entry.answer))
                messages.append(
                    Message(
                        r["message"],
                        r["kind"],
                        base.get(expected) if expected else None,
                        candidates(kb, look, r["message"], v),
                        nearest,
                        answers,
                    )
                )
            out[split] = messages
        checks = known_checks(entries, seed=0)
        keys = {e.question: answer_key(e.answer) for e in entries}
    return Seen(labels, own_scored, out, checks, keys, answers)


def served(message: Message, threshold: float) -> Candidate | None:
    """What serving does: the first look's candidate where it reaches the threshold,
    else the second's."""
    for candidate in message.found:
        if candidate.probability >= threshold:
            return candidate
    return None


@dataclass
class Figures:
    served: int
    right: int
    paraphrases: int

    @property
    def precision(self) -> float:
        return self.right / self.served if self.served else float("nan")

    @property
    def coverage(self) -> float:
        return self.right / max(self.paraphrases, 1)


def measure(messages: Sequence[Message], threshold: float) -> Figures:
    chosen = [(m, served(m, threshold)) for m in messages]
    hits = [c for _, c in chosen if c is not None]
    right = sum(c is not None and c.answer == m.right for m, c in chosen)
    paraphrases = sum(m.right is not None for m in messages)
    return Figures(len(hits), right, paraphrases)


def peer(messages: Sequence[Message], precision: float) -> float:
    cosine = np.array([m.nearest[0] if m.nearest else -1.0 for m in messages])
    good = np.array([m.nearest is not None and m.nearest[1] == m.right for m in messages])
    paraphrases = sum(m.right is not None for m in messages)
    return peer_coverage(cosine, good, paraphrases, precision)[0]


def own_model(
    seen: Seen,
    target: float,
    extra: Sequence[tuple[Label, list[Scored]]] = (),
    judge_error: float = 0.0,
) -> Model:
    labels = [*seen.own, *(label for label, _ in extra)]
    scored = [*seen.own_scored, *(group for _, group in extra)]
    return fit(labels, scored, target, "", judge_error)


def judge_error(seen: Seen, judge: Judge) -> Reliability:
    """The judge on the knowledge base's known questions, as the server checks it
    (``kefu.faq.judge.known_checks``)."""
    tally = Reliability(0, 0, len(seen.checks))
    for judgment, truth in seen.checks:
        key = seen.keys[judgment.message]
        message = Message(judgment.message, "check", key, [], None, seen.answers)
        tally = tally.counted(judge(message, answer_key(judgment.answer)) is truth)
        if tally.hopeless:
            break
    return tally


# ---- the judges ------------------------------------------------------------------------


Judge = Callable[[Message, str], bool | None]


def flipping(seed: int, rate: float) -> Judge:
    """The truth, each verdict flipped with probability ``rate``."""
    rng = random.Random(seed)

    def judge(message: Message, answer: str) -> bool | None:
        truth = message.right == answer
        return truth if rng.random() >= rate else not truth

    return judge


def smollm() -> Judge:
    """The bundled model, asked the server's judge prompt (kefu.faq.judge)."""
    from harness import llama_without_amx
    from kefu.engine.bundled import bundled_model_path

    llm = llama_without_amx(
        model_path=str(bundled_model_path()), n_ctx=1024, n_threads=2, verbose=False
    )

    def judge(message: Message, answer: str) -> bool | None:
        question, text = message.question[answer]
        chat = prompt(Judgment(message.text, question, text))
        out = llm.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in chat],  # type: ignore[misc]
            max_tokens=3,
            temperature=0.0,
        )
        return verdict(str(out["choices"][0]["message"]["content"] or ""))  # type: ignore[index]

    return judge


def replay(seen: Seen, target: float, judge: Judge, seed: int) -> list[str]:
    reliability = judge_error(seen, judge)
    error = reliability.error
    useless = reliability.useless
    used = "its verdicts are not used" if useless else f"{error:.3f} of its verdicts taken out"
    wrong = f"{reliability.wrong} of {reliability.asked}"
    lines = [f"  the judge was wrong on {wrong} known questions: {used}"]
    traffic = [m for split in ("dev", "traffic", "test") for m in seen.splits.get(split, [])]
    random.Random(seed).shuffle(traffic)
    judging = Judging(seed)
    extra: list[tuple[Label, list[Scored]]] = []
    model = own_model(seen, target)
    total = Figures(0, 0, 0)
    window = Figures(0, 0, 0)
    judgments = 0
    for i, message in enumerate(traffic, 1):
        threshold = model.threshold(target)
        chosen = served(message, threshold)
        for figures in (total, window):
            figures.paraphrases += message.right is not None
            if chosen is not None:
                figures.served += 1
                figures.right += chosen.answer == message.right
        if chosen is not None:
            asked = [chosen.answer] if judging.check_served(chosen.answer) else []
        else:  # the LLM answered with the candidates among its passages
            asked = list(dict.fromkeys(c.answer for c in message.found))
        for answer in asked if not useless else ():
            said = judge(message, answer)
            judgments += 1
            if said is None:
                continue
            if chosen is not None:
                judging.counted(answer)
            label = Label(
                message.text,
                "judge",
                right=answer if said else None,
                wrong=None if said else answer,
            )
            extra.append((label, judged(label, message.found)))
            if len(extra) % REFIT_EVERY == 0:  # as the server refits
                model = own_model(seen, target, extra, error)
        if i % EVERY == 0 or i == len(traffic):
            point = model.point
            lines.append(
                f"  {i:5d}  {total.coverage:8.1%}  {total.precision:9.1%}  "
                f"{window.coverage:8.1%}  {window.precision:9.1%}  {point.threshold:6.3f} "
                f"{point.source:>6}  {len(extra):6d}  {judgments:6d}"
            )
            window = Figures(0, 0, 0)
    return lines


# ---- main ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kbs", default="hwu64,snips,atis,afqmc")
    parser.add_argument("--k", default="1,10")
    parser.add_argument("--mode", choices=("test", "replay", "fallback"), default="test")
    parser.add_argument(
        "--judges",
        default="flip10",
        help="replay: comma-separated judges, each replayed on the same looks: flip10 (the "
        "truth flipped 10 %% of the time), exact (never flipped), smollm (the bundled model)",
    )
    parser.add_argument(
        "--faq-precision", default="0.95", help="comma-separated promises (replay); else one"
    )
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--write", action="store_true", help="fallback: write prior.json")
    parser.add_argument(
        "--dump", type=Path, help="test: write each KB's own labels' and messages' candidates here"
    )
    args = parser.parse_args(argv)
    targets = [float(t) for t in args.faq_precision.split(",")]
    target = targets[0]
    e5 = E5Transformer()
    splits = {
        "test": ("dev", "test"),
        "replay": ("dev", "traffic", "test"),
        "fallback": ("dev", "test"),
    }
    judges: dict[str, Callable[[], Judge]] = {
        "flip10": lambda: flipping(args.seed, 0.1),
        "exact": lambda: flipping(args.seed, 0.0),
        "smollm": smollm,
    }
    pooled: list[Scored] = []
    rows = []
    dumped: list[dict[str, object]] = []
    for name in args.kbs.split(","):
        ks = [1] if name == "afqmc" else [int(k) for k in args.k.split(",")]
        for k in ks:
            chosen = splits[args.mode]
            if args.mode == "fallback" and "public" in kb_dir(name).parts:
                chosen = ("dev",)  # a public set's test split stays held out
            seen = see(name, k, e5, chosen, own=args.mode != "fallback")
            if args.mode == "fallback":
                for m in (m for split in seen.splits.values() for m in split):
                    label = Label(m.text, "judge", right=m.right)
                    pooled += judged(label, m.found)
                print(f"{name} K={k}: {len(pooled)} candidates pooled", file=sys.stderr)
                continue
            model = own_model(seen, target)
            if args.dump is not None:
                dumped.append(
                    {
                        "kb": name,
                        "k": k,
                        "own": [[s.probability, s.right] for g in seen.own_scored for s in g],
                        "messages": {
                            split: [
                                [m.kind, m.right, [[c.probability, c.answer] for c in m.found]]
                                for m in messages
                            ]
                            for split, messages in seen.splits.items()
                        },
                    }
                )
                args.dump.write_text(json.dumps(dumped))
            if args.mode == "replay":
                for which in args.judges.split(","):
                    for promise in targets:
                        print(f"\n== {name}, K={k}, judge {which}, promised {promise:.0%}")
                        print(
                            "  after  coverage  precision  (last 100: coverage  precision)  "
                            "serves-at  by  labels  judged"
                        )
                        lines = replay(seen, promise, judges[which](), args.seed)
                        print("\n".join(lines), flush=True)
                continue
            test = seen.splits["test"]
            point = model.point
            figures = measure(test, point.threshold)
            peer_cov = peer(test, figures.precision if figures.served else target)
            rows.append((name, k, figures, peer_cov, point))
            print(
                f"{name} K={k}: served {figures.served}, right {figures.right}, coverage "
                f"{figures.coverage:.1%}, precision {figures.precision:.1%}; serves at "
                f"{point.threshold:.3f} ({point.source}, {point.right}/{point.labelled}, "
                f"bound {point.bound:.3f}); e5 peer {peer_cov:.1%}",
                file=sys.stderr,
            )
    if args.mode == "fallback":
        curve = Curve.of([s.probability for s in pooled], [s.right for s in pooled])
        fallback = {}
        for t in TARGETS:
            point = curve.point(t, load_prior())
            print(
                f"  {t:.2f}: {point.threshold:.3f} ({point.source}, "
                f"{point.right}/{point.labelled}, bound {point.bound:.3f})"
            )
            if point.source == "labels":
                fallback[f"{t:.2f}"] = round(point.threshold, 4)
        if args.write:
            raw = json.loads(PRIOR_FILE.read_text(encoding="utf-8"))
            raw["fallback"] = fallback
            raw["fallback_on"] = (
                f"dev.csv and test.csv of {args.kbs}, K {args.k}: {len(pooled)} candidates; "
                "benchmarks/faq_replay.py --mode fallback --write"
            )
            PRIOR_FILE.write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
        return 0
    if rows:
        print(
            f"\n| KB | K | served | right | coverage | precision (promised {target:.0%}) | "
            "e5 peer at that precision | ratio | serves at | by | bound |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, k, f, peer_cov, point in rows:
            ratio = f"{f.coverage / peer_cov:.2f}x" if peer_cov else "-"
            print(
                f"| {name} | {k} | {f.served} | {f.right} | {f.coverage:.1%} | "
                f"{f.precision:.1%} | {peer_cov:.1%} | {ratio} | {point.threshold:.3f} | "
                f"{point.source} | {point.bound:.3f} |"
            )
        pooled_served = sum(f.served for _, _, f, _, _ in rows)
        pooled_right = sum(f.right for _, _, f, _, _ in rows)
        bound = precision_lower_bound(pooled_right, pooled_served)
        share = pooled_right / max(pooled_served, 1)
        print(f"pooled: {pooled_right} of {pooled_served} right ({share:.1%}); bound {bound:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
