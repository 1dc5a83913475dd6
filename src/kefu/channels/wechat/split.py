"""An answer cut to WeChat's text limit (2,048 bytes of UTF-8 a message) at sentence ends.

Sentences are kept whole and packed into as few messages as fit; a sentence longer than
a message is cut at a clause (，、, ; :), then a space, then any character.
"""

from __future__ import annotations

import re

LIMIT_BYTES = 2048
# A sentence ends after its closing mark (and any closing quote or bracket), or at a newline.
_CLOSING = "\u201d\u2019」』）)\"'"  # closing quotes and brackets
_SENTENCE = re.compile(
    rf"(?<=[。！？!?；;…\n])(?![{_CLOSING}])|(?<=[.!?][{_CLOSING}])|(?<=\.)(?=\s)"
)
_CLAUSE = re.compile(r"(?<=[，、,：:])")
_SPACE = re.compile(r"(?<=\s)")


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def split_text(text: str, limit: int = LIMIT_BYTES) -> list[str]:
    """The parts, in order; ``"".join`` of them is ``text`` less the whitespace at cuts."""
    text = text.strip()
    if not text:
        return []
    if _size(text) <= limit:
        return [text]
    parts: list[str] = []
    current, size = "", 0
    for piece in _pieces(text, limit):
        piece_size = _size(piece)
        if size + piece_size <= limit:
            current, size = current + piece, size + piece_size
            continue
        if current.strip():
            parts.append(current.strip())
        current, size = piece, piece_size
    if current.strip():
        parts.append(current.strip())
    return parts


def _pieces(text: str, limit: int) -> list[str]:
    """Sentences; each one over ``limit`` cut smaller, clause, word, then character."""
    pieces: list[str] = []
    for sentence in _SENTENCE.split(text):
        pieces.extend(_fit(sentence, limit, (_CLAUSE, _SPACE)))
    return [p for p in pieces if p]


def _fit(text: str, limit: int, cuts: tuple[re.Pattern[str], ...]) -> list[str]:
    if _size(text) <= limit:
        return [text]
    if not cuts:
        return _by_characters(text, limit)
    pieces: list[str] = []
    for piece in cuts[0].split(text):
        pieces.extend(_fit(piece, limit, cuts[1:]))
    return pieces


def _by_characters(text: str, limit: int) -> list[str]:
    pieces, current, size = [], "", 0
    for char in text:
        char_size = _size(char)
        if size + char_size > limit:
            pieces.append(current)
            current, size = "", 0
        current, size = current + char, size + char_size
    pieces.append(current)
    return pieces
