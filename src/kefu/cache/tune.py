"""Pick the semantic cache's distance threshold from labelled question pairs.

A pair is (question, cached_question, same): would the cached question's answer
answer the question? A threshold serves every pair within it that the entity
guard lets through; its precision is the share of served pairs that are the
same question. The threshold chosen is the largest whose precision meets the
target, so recall is as high as the target allows. Pairs that normalise to the
same text are served by the exact path whatever the threshold.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kefu.cache.guard import agree
from kefu.knowledge.embedder import Embedder
from kefu.text.normalize import normalize

REQUIRED = ("question", "cached_question", "same")
_TRUE = {"1", "true", "yes", "y"}
_FALSE = {"0", "false", "no", "n"}
BATCH = 32


class TuneError(ValueError):
    """A labelled file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Pair:
    question: str
    cached_question: str
    same: bool
    group: str = ""  # the optional `lang` column, for a per-language breakdown


@dataclass(frozen=True, slots=True)
class Scored:
    pair: Pair
    distance: float  # 0 for pairs the exact path serves
    guard_ok: bool
    reason: str | None


@dataclass(frozen=True, slots=True)
class Point:
    threshold: float
    served: int
    precision: float  # 1.0 when nothing is served: no wrong answer
    recall: float


def read_pairs(path: Path) -> list[Pair]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise TuneError(f"{path}: line 1: missing column(s) {', '.join(missing)}")
            pairs = []
            for row in reader:
                line = reader.line_num
                question, cached = (row.get(c) for c in REQUIRED[:2])
                same = (row.get("same") or "").strip().lower()
                if not question or not question.strip() or not cached or not cached.strip():
                    raise TuneError(f"{path}: line {line}: empty question or cached_question")
                if same not in _TRUE | _FALSE:
                    raise TuneError(f"{path}: line {line}: same must be 1 or 0, got {same!r}")
                group = (row.get("lang") or "").strip()
                pairs.append(Pair(question.strip(), cached.strip(), same in _TRUE, group))
    except OSError as exc:
        raise TuneError(f"cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TuneError(f"{path}: not a UTF-8 CSV file: {exc}") from None
    if not pairs:
        raise TuneError(f"{path}: no labelled pairs")
    return pairs


def score(pairs: Sequence[Pair], embedder: Embedder) -> list[Scored]:
    """Each pair's cosine distance (one batched embedding of every distinct text) and verdict."""
    texts = sorted({t for p in pairs for t in (p.question, p.cached_question)})
    vectors = np.concatenate(
        [embedder.embed_queries(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)]
    )
    row = {text: i for i, text in enumerate(texts)}
    scored = []
    for pair in pairs:
        a, b = vectors[row[pair.question]], vectors[row[pair.cached_question]]
        exact = normalize(pair.question) == normalize(pair.cached_question)
        distance = 0.0 if exact else max(0.0, 1.0 - float(a @ b))
        verdict = agree(pair.question, pair.cached_question)
        scored.append(Scored(pair, distance, exact or verdict.ok, verdict.reason))
    return scored


def evaluate(scored: Sequence[Scored], threshold: float, *, guard: bool = True) -> Point:
    served = [s for s in scored if s.distance <= threshold and (s.guard_ok or not guard)]
    right = sum(s.pair.same for s in served)
    positives = sum(s.pair.same for s in scored)
    return Point(
        threshold,
        len(served),
        right / len(served) if served else 1.0,
        right / positives if positives else 0.0,
    )


def choose(scored: Sequence[Scored], target: float, *, guard: bool = True) -> Point | None:
    """The largest threshold whose precision is at least ``target`` (None if none serves).

    The threshold returned lies halfway to the next pair's distance, rounded down to
    four decimals: it serves exactly the pairs its precision was measured on, with
    a margin against the nearest pair it leaves out.
    """
    candidates = sorted({s.distance for s in scored if s.guard_ok or not guard})
    last: int | None = None
    for i, distance in enumerate(candidates):
        point = evaluate(scored, distance, guard=guard)
        if point.served and point.precision >= target:
            last = i
    if last is None:
        return None
    distance = candidates[last]
    following = candidates[last + 1] if last + 1 < len(candidates) else distance + 0.02
    return evaluate(scored, _floor((distance + following) / 2, distance), guard=guard)


def _floor(value: float, at_least: float) -> float:
    rounded = math.floor(value * 10_000) / 10_000
    return rounded if rounded >= at_least else value


def grid(scored: Sequence[Scored], chosen: float | None, rows: int = 14) -> list[float]:
    """Thresholds for the table: evenly spaced over where the same pairs lie, and the chosen."""
    positives = [s.distance for s in scored if s.pair.same] or [0.1]
    top = max(sorted(positives)[int(0.95 * (len(positives) - 1))], chosen or 0.0) * 1.25
    step = max(top / rows, 0.0005)
    points = {round(step * i, 4) for i in range(1, rows + 1)}
    return sorted(points | ({chosen} if chosen is not None else set()))


def render(scored: Sequence[Scored], target: float) -> tuple[str, Point | None]:
    """The report ``kefu cache tune`` prints, and the chosen point (None: no threshold)."""
    chosen = choose(scored, target)
    bare = choose(scored, target, guard=False)
    same = sum(s.pair.same for s in scored)
    lines = [
        f"{len(scored)} labelled pairs, {same} same; target precision {target:g}",
        "",
        f"{'threshold':>9}  {'served':>6} {'precision':>9} {'recall':>6}   "
        f"{'no guard:':>9} {'served':>6} {'precision':>9} {'recall':>6}",
    ]
    for threshold in grid(scored, chosen.threshold if chosen else None):
        on, off = evaluate(scored, threshold), evaluate(scored, threshold, guard=False)
        mark = " <" if chosen and threshold == chosen.threshold else ""
        lines.append(
            f"{threshold:>9.4f}  {on.served:>6} {on.precision:>9.3f} {on.recall:>6.3f}   "
            f"{'':>9} {off.served:>6} {off.precision:>9.3f} {off.recall:>6.3f}{mark}"
        )
    lines.append("")
    if chosen is None:
        lines.append(f"no threshold reaches precision {target:g}; label more pairs or lower it")
        return "\n".join(lines), None
    off = evaluate(scored, chosen.threshold, guard=False)
    lines += [
        f"chosen threshold {chosen.threshold:.4f}: the largest with precision >= {target:g}",
        f"  with the guard:    precision {chosen.precision:.3f}, recall {chosen.recall:.3f} "
        f"({chosen.served} pairs served)",
        f"  without the guard: precision {off.precision:.3f}, recall {off.recall:.3f} "
        f"({off.served} served) at the same threshold",
    ]
    if bare is None:
        lines.append(f"  without the guard no threshold reaches precision {target:g}")
    else:
        lines.append(
            f"  without the guard the largest threshold reaching {target:g} is "
            f"{bare.threshold:.4f}, recall {bare.recall:.3f}"
        )
    groups = sorted({s.pair.group for s in scored if s.pair.group})
    for group in groups:
        point = evaluate([s for s in scored if s.pair.group == group], chosen.threshold)
        lines.append(
            f"  {group}: precision {point.precision:.3f}, recall {point.recall:.3f} "
            f"({point.served} served)"
        )
    lines += [
        "",
        f"use: kefu serve --cache-threshold {chosen.threshold:.4f}  "
        f"(or KEFU_CACHE_THRESHOLD={chosen.threshold:.4f})",
    ]
    return "\n".join(lines), chosen
