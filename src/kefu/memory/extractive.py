"""The summary code builds at once: the customer's own sentences that carry facts.

A model's summary needs engine time, which a busy engine does not have for minutes;
this one is ready the moment turns leave the prompt, so the prompt never has to keep
them verbatim while it waits. It quotes the customer (a small model repeats a quote
better than it paraphrases), chosen in this order until ``max_tokens``: sentences with a
fact a pattern knows (an order number, a size, an e-mail, any number), then statements,
then questions; the newest first within each kind, printed in the order they were said.
The model's summary replaces it when the engine has room (``keeper.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kefu.engine.base import ChatMessage
from kefu.memory.facts import EMAIL, SIZE
from kefu.text.order_numbers import read_order_number

# Sentence ends: Latin punctuation before a space, CJK punctuation anywhere, line breaks.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
_QUESTION = re.compile(r"[?？]\s*$")
_DIGIT = re.compile(r"\d")
_CJK = re.compile(r"[\u3400-\u9fff]")
# Bytes per token, as the remote engines' estimate (engine/token_count.py): errs short.
BYTES_PER_TOKEN = 3
LEAD = "The customer said earlier:"


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


def extractive_summary(
    messages: Iterable[ChatMessage],
    *,
    max_tokens: int,
    order_pattern: str | None,
    order_example: str | None,
    skip: Iterable[str] = (),
) -> str:
    """Quotes of the customer's sentences in ``messages`` within ``max_tokens``; "" for none.

    ``skip``: texts the memory already holds verbatim (the opening message)."""
    held = [text.casefold() for text in skip]
    sentences: list[str] = []
    for message in messages:
        if message.role != "user":
            continue
        for sentence in _SENTENCE_END.split(message.content):
            sentence = sentence.strip()
            folded = sentence.casefold()
            if not _worth_quoting(sentence) or any(folded in text for text in held):
                continue
            if sentence in sentences:
                sentences.remove(sentence)  # said again: it counts as the newest
            sentences.append(sentence)
    ranked = sorted(
        range(len(sentences)),
        key=lambda i: (_kind(sentences[i], order_pattern, order_example), -i),
    )
    budget = max_tokens - estimate_tokens(LEAD)
    chosen = []
    for i in ranked:
        cost = estimate_tokens(sentences[i]) + 1
        if cost <= budget:
            chosen.append(i)
            budget -= cost
    if not chosen:
        return ""
    return " ".join([LEAD, *(f'"{sentences[i]}"' for i in sorted(chosen))])


def _worth_quoting(sentence: str) -> bool:
    """Greetings and thanks say nothing: at least three words, or four CJK characters."""
    if len(_CJK.findall(sentence)) >= 4:
        return True
    return len(sentence.split()) >= 3


def _kind(sentence: str, order_pattern: str | None, order_example: str | None) -> int:
    """0: a fact a pattern knows; 1: a statement; 2: a question."""
    if (
        _DIGIT.search(sentence)
        or SIZE.search(sentence)
        or EMAIL.search(sentence)
        or read_order_number(sentence, order_pattern, order_example).id is not None
    ):
        return 0
    return 2 if _QUESTION.search(sentence) else 1
