"""``kefu kb calibrate`` and ``kefu kb stats``: fit the fast path's decision to a data
dir's knowledge base on demand (the server does it by itself after every change), and
show the operating point and the expected precision/coverage curve."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from kefu.calibration.fit import fit
from kefu.calibration.model import CALIBRATION_FILE, CURVE_TARGETS, Calibration, Point
from kefu.calibration.probes import fingerprint, make_probes
from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.entries import answer_key
from kefu.knowledge.kb_words import read_texts
from kefu.knowledge.second_look import SECOND_LOOK_FILE, Known, SecondLook
from kefu.service.decision import observe

EMBED_BATCH = 32

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
        help="measure the fast path's decision on the knowledge base and print its curve",
        description="Run the calibration probes (held-out questions, the answers' own first "
        "sentences, questions of a removed answer, perturbed questions, generic "
        "out-of-scope messages) through both looks, measure the decision (the shipped "
        "prior's P(right) against --faq-precision) on them, and store it in "
        f"DATA_DIR/{CALIBRATION_FILE}, where a running server picks it up. Prints the "
        "expected precision and coverage at several promised precisions, and what the "
        "prior kept on customers' wording of other knowledge bases.",
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
        help="the knowledge base's size and the fast path's operating point",
    )
    stats.set_defaults(run=run(run_stats))


def run_calibrate(args: argparse.Namespace, kb: KnowledgeBase, data_dir: Path) -> int:
    if not 0 < args.faq_precision < 1:
        print("kefu kb: error: --faq-precision must be between 0 and 1", file=sys.stderr)
        return 2
    from kefu.knowledge.second_look import E5Transformer

    calibration = calibrate_kb(
        kb,
        SecondLook(E5Transformer(), data_dir / SECOND_LOOK_FILE, margin=0.0),
        args.faq_precision,
        progress=args.progress,
    )
    calibration.save(data_dir / CALIBRATION_FILE)
    print(_describe(calibration))
    return 0


def calibrate_kb(
    kb: KnowledgeBase, look: SecondLook, target: float, *, progress: Callable[[str], Progress]
) -> Calibration:
    """The whole calibration in this thread: the guard's reading of the entries, the
    second look's vectors of their questions, then every probe."""
    kb.prepare()
    kb.learn(read_texts(kb.unread(len(kb) * 4)))
    entries = kb.entries()
    known = [Known.of(entry) for entry in entries]
    show = progress("embedding the questions")
    total = len(known)
    while (left := look.sync(known, 256)) > 0:
        show(total - left, total)
    show(total, total)
    probes = make_probes(entries)
    show = progress("calibrating")

    observations = []
    for start in range(0, len(probes), EMBED_BATCH):
        chunk = probes[start : start + EMBED_BATCH]
        vectors = look.model.embed_queries([probe.text for probe in chunk])
        for probe, vector in zip(chunk, vectors, strict=True):
            # The server's background fit does exactly this (``observe``): the same
            # evidence, so the CLI's curve is the one the server would fit.
            observations.append(observe(kb, look, probe, vector))
        show(len(observations), len(probes))
    return fit(observations, target, fingerprint(entries))


def run_stats(args: argparse.Namespace, kb: KnowledgeBase, data_dir: Path) -> int:
    entries = kb.entries()
    faqs = [entry for entry in entries if entry.kind == "faq"]
    answers = Counter(answer_key(entry.answer) for entry in faqs)
    langs = Counter(entry.lang for entry in entries)
    calibration = Calibration.load(data_dir / CALIBRATION_FILE)
    body: dict[str, object] = {
        "entries": len(entries),
        "faq_answers": len(answers),
        "questions_per_answer": round(len(faqs) / max(len(answers), 1), 2),
        "passages": len(entries) - len(faqs),
        "languages": dict(langs),
        "calibration": None,
    }
    if calibration is not None:
        current = calibration.fingerprint == fingerprint(entries)
        body["calibration"] = {**calibration.summary(), "current": current}
    if args.json:
        print(json.dumps(body, ensure_ascii=False, indent=2))
        return 0
    for key, value in body.items():
        if key != "calibration":
            print(f"{key}: {value}")
    if calibration is None:
        print("calibration: none yet (a running server fits one; or `kefu kb calibrate`)")
    else:
        stale = "" if body["calibration"]["current"] else " (STALE: the entries changed since)"  # type: ignore[index]
        print(f"calibration{stale}:")
        print(_describe(calibration))
    return 0


def _describe(calibration: Calibration) -> str:
    point = calibration.point
    lines = [
        f"operating point at --faq-precision {calibration.target:.2f}: served where the "
        f"prior's P(right) >= {calibration.target:.2f}; expected precision "
        f"{point.precision:.3f}, coverage {point.coverage:.3f} on this knowledge base's "
        "probes (easier than customers' wording)",
    ]
    if calibration.elsewhere:
        lines.append(
            "on customers' wording of knowledge bases the prior was not fitted on: precision "
            f"{calibration.elsewhere['precision']:.3f}, coverage "
            f"{calibration.elsewhere['coverage']:.3f}"
        )
    lines += [
        "probes: " + ", ".join(f"{kind} {n}" for kind, n in sorted(calibration.probes.items())),
        "expected curve (probes):",
        f"  {'promised':>8}  {'precision':>9}  {'coverage':>8}  {'served':>6}",
    ]
    lines += [_row(target, p) for target, p in zip(CURVE_TARGETS, calibration.curve, strict=False)]
    return "\n".join(lines)


def _row(target: float, point: Point) -> str:
    return f"  {target:8.2f}  {point.precision:9.3f}  {point.coverage:8.3f}  {point.served:6d}"
