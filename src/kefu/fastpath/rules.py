"""Cheap, pure detectors of what a customer's message is about, in every installed language.

They run on every message before any retrieval or model call, so they are
regular expressions over the message read once (``kefu.text.message``): microseconds,
no state, and every decision can be read off the pattern that fired. The patterns are
each language pack's ``rules.toml`` (``kefu.text.packs``), joined: general
customer-service language, not particular sentences (a phrase belongs there when any
shop's customers would use it).

Each detector answers with a confidence in [0, 1] (0 = not detected); the
router (``router.py``) weighs them against the knowledge-base hits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kefu.fastpath.smalltalk import smalltalk_kind
from kefu.text import packs
from kefu.text.message import Message, as_message

__all__ = [
    "ANGRY",
    "ASKED_FOR_HUMAN",
    "HandoffSignals",
    "asks_about_order",
    "handoff_score",
    "handoff_signals",
    "is_failure_signal",
    "smalltalk_kind",
]

ASKED_FOR_HUMAN = "asked for a human"
ANGRY = "angry"

# Confidences. An explicit request for a person is as certain as a rule gets; a
# complaint or a manager is a request for a person too, phrased less directly.
EXPLICIT_HUMAN = 1.0
INDIRECT_HUMAN = 0.8
# Anger: one strong marker (profanity, "scam", 垃圾) is enough on its own; a mild
# one ("terrible", "!!!", ALL CAPS) is not, but two of them are.
STRONG_ANGER = 0.85
MILD_ANGER = 0.6
TWO_MILD_ANGER = 0.8
ANGER_REASON = TWO_MILD_ANGER  # from here on the handoff reply apologises


def _any(key: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(packs.any_pattern("rules", key), flags)


# --- order questions ------------------------------------------------------------------

_ORDER_QUESTION = _any("order_question")
# "How can I track my order?" asks how tracking works — the FAQ's job — not where
# one order is; only a question about a particular order goes to the order tool.
_HOW_TO = _any("how_to")


def asks_about_order(message: str | Message) -> bool:
    """Asks where an order is or what state it is in ("where is my parcel?", "物流", "到哪了").

    Not how tracking works ("how can I track my order?", "在哪里看物流"): that is a
    question for the FAQ. With no order number in the message, the order tool
    answers by asking for it.
    """
    text = as_message(message).spaced
    return _ORDER_QUESTION.search(text) is not None and _HOW_TO.search(text) is None


# --- handoff --------------------------------------------------------------------------

_ASKS_HUMAN = _any("asks_human")
_NOT_HUMAN = _any("not_human")  # look like a request for a person: removed first
_COMPLAINT = _any("complaint")
_STRONG_ANGER = _any("strong_anger")
_MILD_ANGER = _any("mild_anger")
# Punctuation, of Latin and of full-width (CJK) keyboards: no language's own words.
_EXCLAIM = re.compile(r"[!！]{2,}|[?？][!！]|[!！][?？]")
_CAPS_WORD = re.compile(r"\b[A-Z]{2,}\b")
# Anchored at a token's start: unanchored, each position of a long digitless run rescanned
# the rest of it (quadratic: 8 000 letters took 0.8 s, a million froze the server).
_CODE = re.compile(r"(?<![\w-])[\w-]*\d[\w-]*")
_LATIN_WORD = re.compile(r"\b[A-Za-z]{2,}\b")


@dataclass(frozen=True, slots=True)
class HandoffSignals:
    """The two reasons for a handoff, scored apart so the router can rank them apart."""

    asked: float  # asked for a person (1.0) or complained / asked for a manager (0.8)
    angry: float


def handoff_signals(message: str | Message) -> HandoffSignals:
    read = as_message(message)
    text = _NOT_HUMAN.sub(" ", read.spaced)
    if _ASKS_HUMAN.search(text):
        asked = EXPLICIT_HUMAN
    elif _COMPLAINT.search(text):
        asked = INDIRECT_HUMAN
    else:
        asked = 0.0
    return HandoffSignals(asked, _anger(read.folded, text))


def handoff_score(message: str | Message) -> tuple[float, str | None]:
    """(confidence, reason): reason "asked for a human" or "angry"; (0, None) when neither.

    Confidence 1.0 means an explicit request for a person. Real anger (``ANGER_REASON``
    or more) is named as the reason even alongside a request, so the reply opens with
    an apology. "human resources" or "are you a real person?" are not requests for a
    person (the latter is who-are-you smalltalk).
    """
    signals = handoff_signals(message)
    confidence = max(signals.asked, signals.angry)
    if confidence == 0:
        return 0.0, None
    if signals.asked == 0 or signals.angry >= ANGER_REASON:
        return confidence, ANGRY
    return confidence, ASKED_FOR_HUMAN


def _anger(original: str, folded: str) -> float:
    if _STRONG_ANGER.search(folded):
        return STRONG_ANGER
    mild = len(_MILD_ANGER.findall(folded))
    mild += _EXCLAIM.search(folded) is not None
    mild += _shouting(original)
    if mild >= 2:
        return TWO_MILD_ANGER
    return MILD_ANGER if mild == 1 else 0.0


def _shouting(original: str) -> bool:  # the folded text, case kept
    """Three or more Latin words, mostly in capitals (codes with digits, as order numbers
    of any shop's shape are, and "I" do not count)."""
    text = _CODE.sub(" ", original)
    words = _LATIN_WORD.findall(text)
    if len(words) < 3:
        return False
    caps = len(_CAPS_WORD.findall(text))
    return caps >= 3 and caps / len(words) >= 0.6


# --- the bot failed -------------------------------------------------------------------

_FAILURE = _any("failure")


def is_failure_signal(message: str | Message) -> bool:
    """The customer says the bot's previous answer failed them ("that didn't help", "答非所问")."""
    return _FAILURE.search(as_message(message).spaced) is not None


# "And the refund?", "what about express?", 运费呢？: short, and about what came before.
_FOLLOW_UP = _any("follow_up", re.IGNORECASE)


def is_follow_up(message: str | Message) -> bool:
    """The message follows on from an earlier one: only the conversation says what it
    asks, so no answer given to other words, verbatim or cached, fits it."""
    return _FOLLOW_UP.search(as_message(message).folded) is not None
