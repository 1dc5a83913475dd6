"""Which KV a new sequence starts from: each slot's KV stream keeps what its last sequence
left, and host memory keeps copies of finished prefixes.

Every slot has a KV stream of its own (llama.cpp's non-unified cache): a decode attends
only over its own stream's cells. In one unified pool every sequence's attention would span
every used cell, masked or not, kept prefixes included, so kept conversations would slow
everyone's decoding (docs/benchmarks.md). A stream keeps its last
sequence's KV when that sequence ends, and the next prompt that starts the same way (the
same conversation's next turn, the persona every request shares) is given that stream and
prefills only what is new. A copy of each finished prefix goes to host memory
(``llama_state_seq_get_data``), so a conversation whose stream went to another customer
meanwhile restores its KV into a free stream: a copy, not a recompute. Copies are evicted
least-recently-used past ``capacity`` entries or ``token_budget`` tokens. Pure
bookkeeping: the scheduler does the llama.cpp calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class SavedPrefix:
    tokens: tuple[int, ...]
    state: bytes  # llama.cpp's serialized KV of ``tokens``
    last_used: int
    pinned: bool = False


@dataclass(slots=True)
class Start:
    """Where a new sequence starts: its stream, the prompt tokens whose KV it will hold
    (kept there, or restored from ``restore`` first), and that copy if one is needed."""

    stream: int
    reuse: int
    restore: SavedPrefix | None = None


@dataclass(slots=True)
class PrefixStats:
    lookups: int = 0
    hits: int = 0
    restores: int = 0  # hits served from a host copy
    prompt_tokens: int = 0
    reused_tokens: int = 0
    evictions: int = 0


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix; slice comparisons run at C speed."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class PrefixCache:
    streams: int
    capacity: int  # host copies kept; 0 keeps none (each stream still keeps its own)
    token_budget: int = 1 << 62  # tokens over all host copies
    min_reuse: int = 8  # shorter matches are not worth a restore or the bookkeeping
    held: list[tuple[int, ...]] = field(init=False)  # per stream: the tokens its KV holds
    busy: list[bool] = field(init=False)
    saved: dict[tuple[int, ...], SavedPrefix] = field(default_factory=dict)
    stats: PrefixStats = field(default_factory=PrefixStats)
    _used: list[int] = field(init=False)  # per stream: when it last started a sequence
    _clock: int = 0

    def __post_init__(self) -> None:
        self.held = [() for _ in range(self.streams)]
        self.busy = [False] * self.streams
        self._used = [0] * self.streams

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    @property
    def cached_tokens(self) -> int:
        return sum(len(tokens) for tokens in self.saved)

    def start(self, prompt: tuple[int, ...]) -> Start:
        """A free stream for ``prompt`` (``_choose``), taken. Raises LookupError when every
        stream is busy."""
        free = [s for s in range(self.streams) if not self.busy[s]]
        if not free:
            raise LookupError("every KV stream is busy")
        start = self._choose(prompt, free)
        if start.restore is not None:
            start.restore.last_used = self._tick()
            self.stats.restores += 1
        self.busy[start.stream] = True
        self._used[start.stream] = self._tick()
        self.held[start.stream] = prompt[: start.reuse]
        self.stats.lookups += 1
        self.stats.prompt_tokens += len(prompt)
        if start.reuse:
            self.stats.hits += 1
            self.stats.reused_tokens += start.reuse
        return start

    def reusable(self, prompt: tuple[int, ...]) -> int:
        """How many of ``prompt``'s tokens ``start`` would start it from now (with every
        stream busy, from whichever frees); counts nothing and touches nothing. Safe from
        another thread: ``_choose`` reads copies."""
        free = [s for s in range(self.streams) if not self.busy[s]]
        return self._choose(prompt, free or list(range(self.streams))).reuse

    def _choose(self, prompt: tuple[int, ...], candidates: list[int]) -> Start:
        """Of the ``candidates`` streams, the one whose kept KV shares the longest prefix with
        ``prompt`` (the least recently used of equals), or, where a host copy shares a
        prefix longer by ``min_reuse`` tokens at least (a restore copies the whole copy), the
        least recently used with that copy to restore. Leaves >= 1 token to prefill."""
        held, used = list(self.held), list(self._used)
        limit = len(prompt) - 1
        kept = {s: min(common_prefix_len(held[s], prompt), limit) for s in candidates}
        stream = max(candidates, key=lambda s: (kept[s], -used[s]))
        reuse = kept[stream] if kept[stream] >= self.min_reuse else 0
        best, copied = None, 0
        for copy in list(self.saved.values()):
            length = min(common_prefix_len(copy.tokens, prompt), limit)
            if length > copied:
                best, copied = copy, length
        if best is not None and copied >= reuse + self.min_reuse:
            return Start(min(candidates, key=lambda s: used[s]), copied, best)
        return Start(stream, reuse)

    def end(self, stream: int, tokens: tuple[int, ...]) -> None:
        """The stream's sequence ended, leaving the KV of ``tokens`` (none: cleared)."""
        self.busy[stream] = False
        self.held[stream] = tokens

    def worth_saving(self, tokens: tuple[int, ...], *, pinned: bool = False) -> bool:
        """Whether a host copy of ``tokens`` would keep anything no copy already holds."""
        if self.capacity == 0 or len(tokens) < self.min_reuse:
            return False
        if len(tokens) > self.token_budget and not pinned:
            return False
        return not any(common_prefix_len(t, tokens) == len(tokens) for t in self.saved)

    def save(self, tokens: tuple[int, ...], state: bytes, *, pinned: bool = False) -> None:
        """Keep a host copy of ``tokens``' KV; a copy it extends goes (a conversation's
        previous turn), then the least recently used until it fits."""
        for covered in [t for t, e in self.saved.items() if not e.pinned]:
            if common_prefix_len(covered, tokens) == len(covered):
                del self.saved[covered]
        while len(self.saved) >= self.capacity or (
            self.cached_tokens + len(tokens) > self.token_budget
        ):
            if not self.evict():
                return  # everything is pinned: keep nothing new
        self.saved[tokens] = SavedPrefix(tokens, state, self._tick(), pinned)

    def evict(self) -> bool:
        """Drop the least recently used unpinned host copy; False if there is none."""
        candidates = [e for e in self.saved.values() if not e.pinned]
        if not candidates:
            return False
        victim = min(candidates, key=lambda e: e.last_used)
        del self.saved[victim.tokens]
        self.stats.evictions += 1
        return True
