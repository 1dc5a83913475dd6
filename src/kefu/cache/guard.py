"""The entity guard: a near match is served only if it asks about the same things.

Sentence embeddings put "do you deliver to Singapore?" nearer to "...to Malaysia?"
than to many true paraphrases, and a question and its negation nearer still;
that is how semantic caches serve confident wrong answers. So the distance only
proposes a cached question, and this module decides, with rules and no model:
two questions agree when they name the same numbers, ids, places and other
names, carry the same number of negations, pick the same side of every
contrast both of them mention (before/after, return/exchange, ...), and are not
a minimal pair (one sentence with one content word swapped, ``frame.py``).

The rules favour precision: anything they cannot reconcile is a miss (the model
answers, a little later), never a wrong answer. The entities themselves are read by
``kefu.text.entities``, below the cache and the knowledge base.
"""

from __future__ import annotations

from dataclasses import dataclass

from kefu.text.entities import Salient, salient
from kefu.text.frame import swapped


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str | None


AGREE = Verdict(True, None)


def agree(question: str, cached_question: str) -> Verdict:
    """Whether an answer cached for ``cached_question`` may answer ``question``."""
    return compare(salient(question), salient(cached_question))


def compare(a: Salient, b: Salient) -> Verdict:
    """``agree`` on precomputed entities (the cache keeps each entry's)."""
    for label, mine, theirs in (
        ("ids", a.ids, b.ids),
        ("numbers", a.numbers, b.numbers),
        ("places", a.places, b.places),
    ):
        if mine != theirs:
            difference = f"{_show(mine - theirs)} vs {_show(theirs - mine)}"
            return Verdict(False, f"{label} differ: {difference}")
    # A name must appear in the other question, as a name or as a plain word: "PayPal"
    # agrees with "paypal", never with "Alipay" or with a question that names nothing.
    only_a = {name for name in a.names - b.names if name not in b.words}
    only_b = {name for name in b.names - a.names if name not in a.words}
    if only_a or only_b:
        return Verdict(False, f"names differ: {_show(only_a)} vs {_show(only_b)}")
    if a.negations != b.negations:
        return Verdict(False, f"negation differs: {a.negations} vs {b.negations}")
    groups_a = {group for group, _ in a.contrasts}
    for group in groups_a & {group for group, _ in b.contrasts}:
        alt_a = {alt for g, alt in a.contrasts if g == group}
        alt_b = {alt for g, alt in b.contrasts if g == group}
        if alt_a != alt_b:
            return Verdict(False, f"opposites differ: {_show(alt_a)} vs {_show(alt_b)}")
    swap = swapped(a.frame, b.frame)
    if swap is not None:
        return Verdict(False, f"words differ: {swap[0]} vs {swap[1]}")
    return AGREE


def _show(items: set[str] | frozenset[str]) -> str:
    return ", ".join(sorted(items)) or "none"
