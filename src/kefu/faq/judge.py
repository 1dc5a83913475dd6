"""Labels from traffic: an engine able to read asks whether an entry's answer answers a
customer's message, after the reply, in the background.

What is judged (``Judging``):

- a message the decision declined, which the LLM answered with entries among its
  passages: each look's candidate. A yes is a right answer the fast path missed, a no
  a near miss it was right to decline;
- a message the fast path served, with a probability that falls as the evidence on its
  answer grows (``explore``, as vCache does): early on, most answers served are
  checked; once an answer has many verdicts, few are.

Before its verdicts are used, the judge answers questions whose answer is known
(``known_checks``: a phrasing with its own answer, and with another's): how often it is
wrong there (``Reliability``) is taken out of its verdicts, and a judge wrong on a
quarter of them is not asked at all.

The verdicts go to the label log (``faq/labels.py``); the next background fit reads
them. Nothing waits for a judge: a verdict that fails or times out is dropped, and past
``BACKLOG`` judgments waiting, new ones are dropped too.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kefu.engine.base import ChatMessage
from kefu.faq.bound import precision_lower_bound
from kefu.knowledge.entries import KbEntry, answer_key

# The judge's question. A yes must be a clear yes: anything else counts as no.
SYSTEM = (
    "You check a customer-service FAQ. Reply with one word: yes if the stored answer "
    "answers the customer's message, no if it does not."
)
# Judgments waiting at most; past that new ones are dropped (labels are a sample anyway).
BACKLOG = 64
# How often a served answer is checked: 1 / (1 + verdicts on it / EXPLORE_HALF), never
# less than EXPLORE_FLOOR.
EXPLORE_HALF = 4.0
EXPLORE_FLOOR = 0.05
# Questions whose answer is known, asked of a judge before its verdicts are used, each
# with its own answer (a yes) and with another's (a no). The lower bound of its error
# from 100 checks can exceed its true rate by several points, and taking out more error
# than a judge makes overstates precision (a 10 %-wrong judge that erred on 16 of 100
# let HWU64 K=10 serve at 82 % of a promised 85 %); from 500, by about one.
CHECKS = 250
# A judge wrong this often on them is no judge: its verdicts are not used (the bundled
# SmolLM2-135M was wrong on 82 of SNIPS's 100: benchmarks/faq_replay.py --judges smollm).
USELESS = 0.25
_YES = re.compile(r"^\W*(?:yes|是|对|能)", re.IGNORECASE)
_NO = re.compile(r"^\W*(?:no|not|否|不)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Judgment:
    """One question for the judge: does ``answer`` (to ``question``) answer ``message``?"""

    message: str
    question: str
    answer: str


def prompt(judgment: Judgment) -> list[ChatMessage]:
    user = (
        f"Customer's message: {judgment.message}\n"
        f"FAQ question: {judgment.question}\n"
        f"Stored answer: {judgment.answer}\n"
        "Does the stored answer answer the customer's message? Reply yes or no."
    )
    return [ChatMessage("system", SYSTEM), ChatMessage("user", user)]


def verdict(reply: str) -> bool | None:
    """Yes, no, or None when the reply says neither."""
    if _YES.match(reply):
        return True
    if _NO.match(reply):
        return False
    return None


def explore(verdicts: int) -> float:
    """The probability of checking a served answer with this many verdicts already."""
    return max(EXPLORE_FLOOR, 1.0 / (1.0 + verdicts / EXPLORE_HALF))


class Judging:
    """Which messages to judge: every declined candidate, served answers by ``explore``,
    which counts the verdicts on an answer *served* (those on its declined candidates lie
    below the threshold and say nothing of what serving it does)."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self.verdicts: dict[str, int] = {}  # answer key -> verdicts on it served so far

    def check_served(self, answer: str) -> bool:
        return self._rng.random() < explore(self.verdicts.get(answer, 0))

    def counted(self, answer: str) -> None:
        self.verdicts[answer] = self.verdicts.get(answer, 0) + 1


def known_checks(
    entries: Sequence[KbEntry], seed: int | None = None
) -> list[tuple[Judgment, bool]]:
    """Up to ``CHECKS`` of the knowledge base's questions, each asked with its answer
    (shown under another of its phrasings where it has one) and with another answer."""
    groups: dict[str, list[KbEntry]] = {}
    for entry in sorted(entries, key=lambda e: e.id):
        if entry.kind == "faq":
            groups.setdefault(answer_key(entry.answer), []).append(entry)
    keys = sorted(groups)
    if len(keys) < 2:
        return []
    rng = random.Random(seed)
    questions = [entry for key in keys for entry in groups[key]]
    checks = []
    for entry in rng.sample(questions, min(CHECKS, len(questions))):
        key = answer_key(entry.answer)
        others = [e for e in groups[key] if e.id != entry.id]
        own = rng.choice(others) if others else entry
        other = groups[rng.choice([k for k in keys if k != key])][0]
        checks.append((Judgment(entry.question, own.question, own.answer), True))
        checks.append((Judgment(entry.question, other.question, other.answer), False))
    return checks


@dataclass(frozen=True, slots=True)
class Reliability:
    """How a judge did on questions whose answer is known; an unclear verdict is wrong."""

    asked: int
    wrong: int
    planned: int = 0  # the checks it was to answer

    def counted(self, right: bool) -> Reliability:
        """One more check answered."""
        return Reliability(self.asked + 1, self.wrong + (not right), self.planned)

    @property
    def hopeless(self) -> bool:
        """So many wrong already that the judge is useless whatever the rest of the planned
        checks say: the check stops there."""
        return self.wrong >= USELESS * max(self.planned, self.asked)

    @property
    def useless(self) -> bool:
        return not self.asked or self.wrong >= USELESS * self.asked

    @property
    def error(self) -> float:
        """The rate of error taken out of its verdicts: the lower Clopper-Pearson bound
        of its share wrong (taking out more than it makes would overstate precision)."""
        return precision_lower_bound(self.wrong, self.asked) if self.asked else 0.0

    def summary(self) -> dict[str, object]:
        return {
            "asked": self.asked,
            "wrong": self.wrong,
            "error_taken_out": round(self.error, 4),
            "used": not self.useless,
        }
