"""``kefu kb calibrate`` and ``kefu kb stats``: fit the fast path's decision to a data
dir's knowledge base and labels on demand (the server does it by itself after every
change), and show what serves: the threshold, the labels it stands on, the bound."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from kefu.faq.bound import CONFIDENCE
from kefu.faq.fit import fit, observe
from kefu.faq.labels import LABELS_FILE, Label, LabelLog, current
from kefu.faq.model import MODEL_FILE, Model, load_prior, operating_point
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.entries import answer_key
from kefu.knowledge.kb_words import read_texts
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.knowledge.second_look import SECOND_LOOK_FILE, Known, SecondLook

EMBED_BATCH = 32
# The promised precisions ``kefu kb calibrate`` shows the threshold of.
TARGETS = (0.8, 0.85, 0.9, 0.95, 0.97, 0.99)

Progress = Callable[[int, int], None]
# A command given the data dir's knowledge base, opened and closed for it.
Command = Callable[[argparse.Namespace, KnowledgeBase, Path], int]


def register(
    kb: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
    run: Callable[[Command], Callable[[argparse.Namespace], int]],
    progress: Callable[[str], Progress],
) -> None:
    """Add the two commands to ``kefu kb``; ``run`` wraps them as the others are."""
    calibrate = kb.add_parser(
        "calibrate",
        parents=list(parents),
        help="fit the fast path's decision to the knowledge base's labels and print it",
        description="Run the knowledge base's labels (each of its questions held out alone "
        "(of answers with several), the rejected misses, the judge's verdicts on traffic) "
        "through both looks, choose the lowest P(right) at which the labels bound the "
        "precision from below at --faq-precision (Clopper-Pearson), or where they are too "
        "few, the shipped prior's conservative threshold, and store the model in "
        f"DATA_DIR/{MODEL_FILE}, where a running server picks it up.",
    )
    calibrate.add_argument(
        "--judge-error",
        type=float,
        default=float(os.environ.get("KEFU_JUDGE_ERROR", "0")),
        help="as the server's --judge-error (KEFU_JUDGE_ERROR)",
    )
    calibrate.add_argument(
        "--faq-precision",
        type=float,
        default=float(os.environ.get("KEFU_FAQ_PRECISION", "0.95")),
        help="the precision to keep, as the server's --faq-precision (KEFU_FAQ_PRECISION)",
    )
    calibrate.set_defaults(run=run(run_calibrate), progress=progress)
    stats = kb.add_parser(
        "stats",
        parents=list(parents),
        help="the knowledge base's size and what the fast path's decision stands on",
    )
    stats.set_defaults(run=run(run_stats))


def run_calibrate(args: argparse.Namespace, kb: KnowledgeBase, data_dir: Path) -> int:
    if not 0 < args.faq_precision < 1:
        print("kefu kb: error: --faq-precision must be between 0 and 1", file=sys.stderr)
        return 2
    from kefu.knowledge.second_look import E5Transformer

    look = SecondLook(E5Transformer(), data_dir / SECOND_LOOK_FILE)
    model = calibrate_kb(
        kb, look, args.faq_precision, data_dir, progress=args.progress, judge_error=args.judge_error
    )
    model.save(data_dir / MODEL_FILE)
    print(describe(model))
    return 0


def labels_of(kb: KnowledgeBase, data_dir: Path) -> tuple[str, list[Label]]:
    """The fingerprint the server would give this state, and its labels."""
    misses = MissLog(data_dir / MISSES_FILE)
    verdicts = LabelLog(data_dir / LABELS_FILE)
    try:
        return current(kb.entries(), misses, verdicts)
    finally:
        misses.close()
        verdicts.close()


def calibrate_kb(
    kb: KnowledgeBase,
    look: SecondLook,
    target: float,
    data_dir: Path,
    *,
    progress: Callable[[str], Progress],
    judge_error: float = 0.0,
    reviewed: Sequence[Label] = (),
) -> Model:
    """The whole fit in this thread: the guard's reading of the entries, the second
    look's vectors of their questions, then every label (``reviewed``: more labels
    from traffic, reviewed elsewhere)."""
    kb.prepare()
    kb.learn(read_texts(kb.unread(len(kb) * 4)))
    known = [Known.of(entry) for entry in kb.entries()]
    show = progress("embedding the questions")
    while (left := look.sync(known, 256)) > 0:
        show(len(known) - left, len(known))
    show(len(known), len(known))
    prints, labels = labels_of(kb, data_dir)
    labels = [*labels, *reviewed]
    show = progress("calibrating")
    scored = []
    for start in range(0, len(labels), EMBED_BATCH):
        chunk = labels[start : start + EMBED_BATCH]
        vectors = look.model.embed_queries([label.text for label in chunk])
        # The server's background fit does exactly this: the same evidence.
        scored += [observe(kb, look, label, v) for label, v in zip(chunk, vectors, strict=True)]
        show(len(scored), len(labels))
    return fit(labels, scored, target, prints, judge_error)


def run_stats(args: argparse.Namespace, kb: KnowledgeBase, data_dir: Path) -> int:
    entries = kb.entries()
    faqs = [entry for entry in entries if entry.kind == "faq"]
    answers = Counter(answer_key(entry.answer) for entry in faqs)
    langs = Counter(entry.lang for entry in entries)
    model = Model.load(data_dir / MODEL_FILE)
    body: dict[str, object] = {
        "entries": len(entries),
        "faq_answers": len(answers),
        "questions_per_answer": round(len(faqs) / max(len(answers), 1), 2),
        "passages": len(entries) - len(faqs),
        "languages": dict(langs),
        "decision": None,
    }
    if model is not None:
        current = model.fingerprint == labels_of(kb, data_dir)[0]
        body["decision"] = {**model.summary(), "current": current}
    if args.json:
        print(json.dumps(body, ensure_ascii=False, indent=2))
        return 0
    for key, value in body.items():
        if key != "decision":
            print(f"{key}: {value}")
    if model is None:
        print("decision: the prior's (a running server fits one; or `kefu kb calibrate`)")
    else:
        stale = "" if body["decision"]["current"] else " (STALE: entries or labels changed since)"  # type: ignore[index]
        print(f"decision{stale}:")
        print(describe(model))
    return 0


def describe(model: Model) -> str:
    point = model.point
    by = {
        "labels": f"the labels: {point.right} of {point.labelled} labelled candidates right "
        f"there, precision >= {point.bound:.3f} at {CONFIDENCE:.0%} confidence",
        "prior": "the shipped prior's conservative threshold: too few labels for the bound "
        f"to reach {model.target:.2f} ({point.right} of {point.labelled} right there)",
        "none": f"nothing: {point.right} of {point.labelled} labelled candidates right at the "
        "prior's threshold, below the promise",
    }[point.source]
    steps = model.curve.steps
    lines = [
        f"serves at --faq-precision {model.target:.2f} where P(right) >= "
        f"{point.threshold:.3f}, decided by {by}",
        "labels: " + ", ".join(f"{kind} {n}" for kind, n in sorted(model.labels.items())),
        f"labelled candidates: {steps[-1].labelled if steps else 0}",
        "threshold at other promises:",
        f"  {'promised':>8}  {'serves at':>9}  {'by':>6}  {'right':>5}  {'of':>5}  {'bound':>5}",
    ]
    for target in TARGETS:
        p = operating_point(model.curve, model.traffic, target, load_prior(), model.judge_error)
        lines.append(
            f"  {target:8.2f}  {p.threshold:9.3f}  {p.source:>6}  {p.right:5d}  "
            f"{p.labelled:5d}  {p.bound:5.3f}"
        )
    return "\n".join(lines)
