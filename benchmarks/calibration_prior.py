"""The FAQ decision's shipped prior: two logistic regressions (one a look) that rank each
look's candidate by P(right), fitted on labelled customer wording, and measured leave one
knowledge base out. The training code lives here, not in the server: the server only
reads ``src/kefu/faq/static/prior.json``.

1. **features**: for each KB (``NAMES``) and K (1: ``kb.csv``; 10: ``kb10.csv``), imported
   into a fresh data dir, every message of ``dev.csv`` and ``test.csv`` goes through both
   looks exactly as serving reads it (``kefu.faq.decide.first`` and ``second``, the guard
   read): each look's features, whether its answer is right, and the answer's language.
   Cached in ``--cache``.
2. **leave one KB out**: fit on the other KBs' messages (both K), serve the left-out KB's
   messages where P(right) reaches the target; print precision and coverage.
3. ``--write``: fit on all the KBs' messages and write the weights into prior.json (its
   ``fallback`` thresholds are ``faq_replay.py --mode fallback``'s).

Each weight is kept to the sign its feature's meaning allows (``SIGNS``): a feature
whose best weight has the other sign is left out and the rest fitted again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from faq_replay import imported
from kb_quality import kb_dir, read_csv
from kefu.faq.decide import HITS, Evidence, first, second
from kefu.faq.model import PRIOR_FILE, Logistic
from kefu.knowledge.entries import answer_key
from kefu.knowledge.second_look import E5Transformer
from kefu.text.message import read_message
from kefu.text.words import language

Floats = npt.NDArray[np.float64]
CACHE = Path(tempfile.gettempdir()) / "kefu_calibration_prior_features.json"
NAMES = (
    "telecom_en",
    "bank_zh",
    "saas_en",
    "airline_zh",
    "insurance_en",
    "hotel_zh",
    "pharmacy_en",
    "edu_zh",
    "energy_en",
)
SPLITS = ("dev", "test")  # both tuning now
# The L2 penalty on standardised weights: enough to keep a feature that separates the
# messages perfectly (an objection of the guard) from an infinite weight.
PENALTY = 1.0
NEWTON_STEPS = 25
# Which way each finding may move P(right) (``kefu.faq.evidence.Findings.features``):
# each says the entry may be wrong, except the nearness of the least covered word.
FINDING_SIGNS = (-1, -1, -1, -1, -1, -1, +1)
SIGNS = {
    # The fused score and its lead only raise P(right); its lexical and dense parts,
    # given the score, may go either way.
    "first": (+1, +1, 0, 0, *FINDING_SIGNS),
    # Nearer and further ahead, by question or by answer, only raise it.
    "second": (+1, +1, +1, +1, +1, +1, *FINDING_SIGNS),
}


def fit_logistic(features: Floats, labels: npt.NDArray[np.bool_], signs: Sequence[int]) -> Logistic:
    """Newton's method on an L2-penalised log-loss; a feature whose weight has the wrong
    sign is left out and the rest fitted again, until every weight agrees."""
    free = np.ones(features.shape[1], dtype=bool)
    while True:
        means = features.mean(axis=0)
        scales = np.maximum(features.std(axis=0), 1e-6)
        x = np.hstack([((features - means) / scales)[:, free], np.ones((len(features), 1))])
        y = labels.astype(np.float64)
        w = np.zeros(x.shape[1])
        penalty = np.full(x.shape[1], PENALTY)
        penalty[-1] = 0.0  # the bias is not penalised
        for _ in range(NEWTON_STEPS):
            p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -40, 40)))
            gradient = x.T @ (p - y) + penalty * w
            hessian = (x.T * (p * (1 - p))) @ x + np.diag(penalty + 1e-9)
            step = np.linalg.solve(hessian, gradient)
            w -= step
            if float(np.abs(step).max()) < 1e-8:
                break
        weights = np.zeros(features.shape[1])
        weights[free] = w[:-1]
        wrong = [
            i for i, (wt, sign) in enumerate(zip(weights, signs, strict=True)) if wt * sign < 0
        ]
        if not wrong:
            return Logistic(
                tuple(map(float, means)),
                tuple(map(float, scales)),
                tuple(map(float, weights)),
                float(w[-1]),
            )
        free[wrong] = False


def features_of(name: str, k: int, model: E5Transformer) -> list[dict[str, Any]]:
    folder = kb_dir(name)
    kb_file = folder / ("kb.csv" if k == 1 else f"kb{k}.csv")
    base = {r["question"].strip(): answer_key(r["answer"]) for r in read_csv(folder / "kb.csv")}
    rows = [
        r
        for split in SPLITS
        if (folder / f"{split}.csv").exists()
        for r in read_csv(folder / f"{split}.csv")
    ]
    with imported(kb_file, model) as (kb, look):
        vectors = model.embed_queries([r["message"] for r in rows])
        out = []
        for r, vector in zip(rows, vectors, strict=True):
            expected = r["expected_question"].strip()
            right = base.get(expected) if expected else None
            message = read_message(r["message"])
            found: list[Evidence | None] = [first(kb, message, kb.search(message, k=HITS))]
            nearest = look.nearest(vector)
            found.append(None if nearest is None else second(kb, message, nearest))
            row: dict[str, Any] = {"kind": r["kind"], "lang": message.lang}
            for evidence in found:
                if evidence is not None:
                    row[evidence.look] = {
                        "x": list(evidence.features),
                        "right": answer_key(evidence.entry.answer) == right,
                        "same_lang": language(evidence.entry.answer) == message.lang,
                    }
            out.append(row)
        return out


def fit_on(rows: Sequence[dict[str, Any]]) -> dict[str, Logistic]:
    fitted = {}
    for look in ("first", "second"):
        seen = [r[look] for r in rows if look in r]
        x = np.array([s["x"] for s in seen], dtype=np.float64)
        y = np.array([s["right"] for s in seen], dtype=bool)
        fitted[look] = fit_logistic(x, y, SIGNS[look])
    return fitted


def serve(
    rows: Sequence[dict[str, Any]], models: dict[str, Logistic], t: float
) -> tuple[int, int, int]:
    """(served, right, paraphrases): the first look's candidate where it reaches t, else the
    second look's; only in the message's language."""
    served = right = 0
    for r in rows:
        for look in ("first", "second"):
            seen = r.get(look)
            if seen and seen["same_lang"] and models[look].probability(seen["x"]) >= t:
                served += 1
                right += seen["right"]
                break
    return served, right, sum(r["kind"] == "paraphrase" for r in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=CACHE, help="features, computed once")
    parser.add_argument("--refresh", action="store_true", help="compute the features again")
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--write", action="store_true", help="write the weights into prior.json")
    args = parser.parse_args(argv)
    if args.refresh or not args.cache.exists():
        e5 = E5Transformer()
        args.cache.write_text(
            json.dumps({f"{n}/{k}": features_of(n, k, e5) for n in NAMES for k in (1, 10)})
        )
    data: dict[str, list[dict[str, Any]]] = json.loads(args.cache.read_text())
    total = [0, 0, 0]
    print(f"leave one KB out, served where P(right) >= {args.target}")
    for held in NAMES:
        models = fit_on([r for n in NAMES if n != held for k in (1, 10) for r in data[f"{n}/{k}"]])
        for k in (1, 10):
            s, r, a = serve(data[f"{held}/{k}"], models, args.target)
            total = [total[0] + s, total[1] + r, total[2] + a]
            print(f"  {held} K={k}: {r} of {s} right, coverage {r / max(a, 1):.1%}")
    print(
        f"pooled: {total[1]} of {total[0]} right ({total[1] / max(total[0], 1):.1%}), "
        f"coverage {total[1] / max(total[2], 1):.1%}"
    )
    if args.write:
        every = [r for rows in data.values() for r in rows]
        models = fit_on(every)
        raw = json.loads(PRIOR_FILE.read_text(encoding="utf-8"))
        raw["first"], raw["second"] = asdict(models["first"]), asdict(models["second"])
        raw["fitted_on"] = (
            f"dev.csv and test.csv of benchmarks/data/kbs/{{{','.join(NAMES)}}}, each imported "
            f"with kb.csv and kb10.csv: {len(every)} messages; "
            "benchmarks/calibration_prior.py --write"
        )
        PRIOR_FILE.write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {PRIOR_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
