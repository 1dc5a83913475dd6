"""Minimal pairs: one question frame with one short span swapped.

"How wide is the Nora bookshelf?" and "How tall is the Nora bookshelf?" are a
cosine distance of 0.02 apart, nearer than most paraphrases, because all but
one word is shared. When two questions are the same sentence except for one or
two content words (a few characters in Chinese), those words are what is being
asked, so the pair is a different question whatever its distance. True
paraphrases reword more than one slot and are left to the threshold;
function words and light verbs ("do you have" / "do you sell", "work with" /
"be used with") are dropped first so they never count as the swapped span.
"""

from __future__ import annotations

import re
import sys

from kefu.text.lexicon import NUMBER_WORDS_EN
from kefu.text.normalize import normalize

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W_]+(?:'[^\\W_]+)*")
_IS_CJK = re.compile(f"[{_CJK}]")
_DIGIT = re.compile(r"\d")  # numbers and ids are the entity rules' to judge

_STOP_EN = frozenset(
    str.split(
        """a an the this that these those it its i me my you your we our us they them their
    is are was were be been am do does did can could will would should shall may might
    must of for to in on at with by from about into onto as and or if so any some there
    here please tell know let me have has had sell sells offer offers carry carries stock
    get got available possible use used using work works fit fits go goes made make
    come comes include includes included need want able ok just also really still way
    kind sort type suitable suit good best recommend recommended"""
    )
)
# One word for what customers say several ways, so the swap is not a difference.
_SAME_EN = (
    {"which": "what", "whats": "what", "what's": "what"}
    | dict.fromkeys(
        ("ship", "ships", "shipped", "shipping", "delivery", "delivers", "delivered", "postage"),
        "deliver",
    )
    | dict.fromkeys(("price", "fee", "fees", "charge", "costs"), "cost")
)
_QUESTION_WORDS = frozenset({"what", "when", "where", "who", "why", "how", "whose"})
_A_NOT_A = re.compile(f"([{_CJK}])[不没]\\1")  # 配不配 asks 配
_PARTICLES_ZH = frozenset("吗呢吧啊呀么")
# Characters that alone cannot be the point of a question: have, sell, can, will, is...
_LIGHT_ZH = frozenset("有卖能可以会是要想的了在用把给请问带配你们我")
_SPAN_WORDS = 2
_SPAN_CHARS = 3
_CONTEXT_WORDS = 2
_CONTEXT_CHARS = 3


def frame(text: str) -> tuple[str, ...]:
    """Content tokens in order: Latin words less function words, Chinese characters."""
    return frame_of_normal(normalize(text))


def frame_of_normal(normal: str) -> tuple[str, ...]:
    """``frame`` of a text's ``normalize`` form."""
    out = []
    for token in _TOKEN.findall(_A_NOT_A.sub(r"\1", normal)):
        if _IS_CJK.match(token):
            if token not in _PARTICLES_ZH:
                out.append(sys.intern(token))
        elif token not in _STOP_EN and token not in NUMBER_WORDS_EN and not _DIGIT.search(token):
            # Interned: a cached answer keeps its question's frame, and the words repeat.
            out.append(sys.intern(_SAME_EN.get(token, token)))
    return tuple(out)


def swapped(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, str] | None:
    """The spans two frames swap, if they are a minimal pair; else None."""
    if a == b:
        return None
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    x, y = a[prefix : len(a) - suffix], b[prefix : len(b) - suffix]
    if not x or not y:
        return None  # something added, not swapped: a detail, left to the threshold
    if len(x) == len(y) == 1 and {x[0], y[0]} <= _QUESTION_WORDS:
        return x[0], y[0]  # "when" / "where": a different question in any frame
    chinese = any(_IS_CJK.match(token) for token in x + y)
    span, context = (_SPAN_CHARS, _CONTEXT_CHARS) if chinese else (_SPAN_WORDS, _CONTEXT_WORDS)
    if len(x) > span or len(y) > span or prefix + suffix < context:
        return None
    if chinese:  # light characters around the swap are wording, not the point
        x = tuple(token for token in x if token not in _LIGHT_ZH)
        y = tuple(token for token in y if token not in _LIGHT_ZH)
        if not x or not y:
            return None
    if set(x) & set(y):
        return None  # words moved around: a rewording
    if (len(x) > 1 or len(y) > 1) and _QUESTION_WORDS & set(x + y):
        return None  # "what height" / "how tall": the question was rephrased, not swapped
    if len(x) == len(y) == 1 and _same_stem(x[0], y[0]):
        return None
    joiner = "" if chinese else " "
    return joiner.join(x), joiner.join(y)


def _same_stem(a: str, b: str) -> bool:
    """chair/chairs, mattress/mattresses, dim/dimmable: one word, two endings."""
    short, long = sorted((a, b), key=len)
    return len(short) >= 3 and long.startswith(short[: max(3, len(short) - 1)])
