"""Which KV prefixes the engine keeps after their sequence ended, and which one a prompt reuses.

With llama.cpp's unified KV cache, giving a new sequence the first ``n`` cells of
a kept one (``llama_memory_seq_cp``) shares the cells: no copy, no recompute. So
a finished reply's KV stays behind as an entry; the next prompt that starts the
same way (the persona every request shares, or the same conversation's next
turn) prefills only what is new. Entries are evicted least-recently-used when
sequence ids or KV cells run short. Pure bookkeeping: the scheduler does the
llama.cpp calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class CachedPrefix:
    seq_id: int
    tokens: tuple[int, ...]
    last_used: int
    pinned: bool = False


@dataclass(slots=True)
class PrefixStats:
    lookups: int = 0
    hits: int = 0
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
    capacity: int
    # Kept cells cost every decode: attention spans all used KV cells, masked or not
    # (measured: 16k cached tokens slowed decoding by 60 %). So the cache has a token budget.
    token_budget: int = 1 << 62
    min_reuse: int = 8  # shorter matches are not worth a lookup's bookkeeping
    entries: dict[int, CachedPrefix] = field(default_factory=dict)
    stats: PrefixStats = field(default_factory=PrefixStats)
    _clock: int = 0

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    @property
    def cached_tokens(self) -> int:
        return sum(len(e.tokens) for e in self.entries.values())

    def match(self, prompt: tuple[int, ...]) -> tuple[CachedPrefix | None, int]:
        """The entry sharing the longest prefix with ``prompt``, leaving >= 1 token to prefill."""
        best: CachedPrefix | None = None
        best_len = 0
        for entry in self.entries.values():
            length = common_prefix_len(entry.tokens, prompt)
            if length > best_len:
                best, best_len = entry, length
        best_len = min(best_len, len(prompt) - 1)
        self.stats.lookups += 1
        self.stats.prompt_tokens += len(prompt)
        if best is None or best_len < self.min_reuse:
            return None, 0
        best.last_used = self._tick()
        self.stats.hits += 1
        self.stats.reused_tokens += best_len
        return best, best_len

    def reusable(self, prompt: tuple[int, ...]) -> int:
        """How many of ``prompt``'s tokens ``match`` would reuse now; counts nothing and
        touches no entry. Safe from another thread: it reads a copy of the entries."""
        best = max(
            (common_prefix_len(e.tokens, prompt) for e in list(self.entries.values())), default=0
        )
        best = min(best, len(prompt) - 1)
        return best if best >= self.min_reuse else 0

    def add(self, seq_id: int, tokens: tuple[int, ...], *, pinned: bool = False) -> list[int]:
        """Keep ``seq_id``'s KV; returns the sequence ids evicted to make room (to free)."""
        # An entry the new one extends adds nothing (a conversation's previous turn).
        evicted = [
            e.seq_id
            for e in self.entries.values()
            if not e.pinned and common_prefix_len(e.tokens, tokens) == len(e.tokens)
        ]
        for covered in evicted:
            del self.entries[covered]
        if len(tokens) > self.token_budget and not pinned:
            return [*evicted, seq_id]
        while len(self.entries) >= self.capacity or (
            self.cached_tokens + len(tokens) > self.token_budget
        ):
            victim = self.evict()
            if victim is None:
                return [*evicted, seq_id]  # everything is pinned: keep nothing new
            evicted.append(victim)
        self.entries[seq_id] = CachedPrefix(seq_id, tokens, self._tick(), pinned)
        return evicted

    def evict(self) -> int | None:
        """Drop the least recently used unpinned entry; returns its seq id, None if none."""
        candidates = [e for e in self.entries.values() if not e.pinned]
        if not candidates:
            return None
        victim = min(candidates, key=lambda e: e.last_used)
        del self.entries[victim.seq_id]
        self.stats.evictions += 1
        return victim.seq_id
