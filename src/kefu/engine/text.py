"""Turn a stream of token bytes into safe text deltas: whole UTF-8 characters, stop strings cut.

A token may end in the middle of a multi-byte character (common in Chinese), and
a stop string may span tokens. Text is released only when it can no longer
become part of either, so a client never sees a broken character or the start
of a stop string.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence


class StreamText:
    def __init__(self, stops: Sequence[str] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = [s for s in stops if s]
        self._held = ""  # decoded text that might still begin a stop string
        self.text = ""  # everything released so far
        self.stopped = False

    def feed(self, data: bytes) -> str:
        """Add a token's bytes; return the text now safe to send (may be empty)."""
        if self.stopped:
            return ""
        return self._release(self._held + self._decoder.decode(data))

    def finish(self) -> str:
        """End of stream: flush what was held.

        Bytes of a character the reply was cut in the middle of (max_tokens, end of
        window) are dropped: they can never become that character, and U+FFFD would
        only show the client where the cut fell.
        """
        if self.stopped:
            return ""
        self._decoder.reset()
        pending = self._held
        self._held = ""
        return self._emit(pending)

    def _release(self, pending: str) -> str:
        cut = _first_stop(pending, self._stops)
        if cut is not None:
            self.stopped = True
            self._held = ""
            return self._emit(pending[:cut])
        keep = _longest_stop_prefix_suffix(pending, self._stops)
        self._held = pending[len(pending) - keep :] if keep else ""
        return self._emit(pending[: len(pending) - keep])

    def _emit(self, text: str) -> str:
        self.text += text
        return text


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    positions = [i for s in stops if (i := text.find(s)) >= 0]
    return min(positions) if positions else None


def _longest_stop_prefix_suffix(text: str, stops: Sequence[str]) -> int:
    """Length of the longest end of ``text`` that is a proper prefix of some stop string."""
    best = 0
    for stop in stops:
        for length in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:length]):
                best = length
                break
    return best
