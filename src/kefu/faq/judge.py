"""Labels from traffic: an engine able to read asks whether an entry's answer answers a
customer's message, after the reply, in the background.

What is judged (``Judging``):

- a message the decision declined, which the LLM answered with entries among its
  passages: each look's candidate. A yes is a right answer the fast path missed, a no
  a near miss it was right to decline;
- a message the fast path served, with a probability that falls as the evidence on its
  answer grows (``explore``, as vCache does): early on, most answers served are
  checked; once an answer has many verdicts, few are.

The verdicts go to the label log (``faq/labels.py``); the next background fit reads
them. Nothing waits for a judge: a verdict that fails or times out is dropped, and past
``BACKLOG`` judgments waiting, new ones are dropped too.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from kefu.engine.base import ChatMessage

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
