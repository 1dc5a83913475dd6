"""How likely a request misses the SLO, against admission's estimate for it: the recent
outcomes' miss rate, fitted as a curve that never falls as the estimate grows (isotonic
regression, pool-adjacent-violators).

A refusal is a claim that the request would miss. A quantile of the first-token time past
the SLO claims only that it might: a p90 past the SLO refuses requests whose first token
has a one-in-ten chance of coming late. The curve says how often requests estimated like this
one did miss; admission refuses where that share is high (``MISS_CONFIDENCE``), and the
line's deadline turns the rest that would miss into a refusal before their slot.

Each block's share is shrunk towards one half by a uniform prior (one miss, one made), so
a block of three misses reads 0.8, not 1: a handful of outcomes is no confidence.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

# The share of requests estimated alike that missed, from which a request is refused:
# eight misses in a row with nothing made among them reach it (9 / 10), a handful do not.
MISS_CONFIDENCE = 0.9


class MissCurve:
    """P(miss | estimate) over ``(estimate, missed)`` outcomes; 0.5 with none."""

    def __init__(self, outcomes: Iterable[tuple[float, bool]]) -> None:
        alike: dict[float, list[float]] = {}  # outcomes of one estimate are one point
        self._estimates: list[float] = []
        for estimate, missed in outcomes:
            self._estimates.append(estimate)
            point = alike.setdefault(estimate, [0.0, 0.0])
            point[0] += missed
            point[1] += 1
        blocks: list[list[float]] = []  # [misses, count, smallest estimate]
        for estimate, (misses, count) in sorted(alike.items()):
            blocks.append([misses, count, estimate])
            while len(blocks) > 1 and _share(blocks[-2]) >= _share(blocks[-1]):
                misses, count, _ = blocks.pop()
                blocks[-1][0] += misses
                blocks[-1][1] += count
        self._estimates.sort()
        self._lowers = [block[2] for block in blocks]
        self._counts = [(int(misses), int(count)) for misses, count, _ in blocks]
        self._shares: list[float] = []
        for misses, count, _ in blocks:
            shrunk = (misses + 1) / (count + 2)
            # Shrinking can undo the order of a small block and a large one after it.
            self._shares.append(max(shrunk, self._shares[-1] if self._shares else 0.0))

    def __call__(self, estimate: float) -> float:
        """The share of requests estimated at ``estimate`` that miss: the block it falls in,
        the lower one where it falls between two (a refusal needs outcomes that reach it),
        the first below them all, the last past them all."""
        if not self._shares:
            return 0.5
        return self._shares[self._block_of(estimate)]

    def block(self, estimate: float) -> tuple[int, int]:
        """(misses, outcomes) of the block ``estimate`` falls in, as ``__call__`` picks it:
        what its share stands on. (0, 0) with no outcomes."""
        return self._counts[self._block_of(estimate)] if self._counts else (0, 0)

    def _block_of(self, estimate: float) -> int:
        return max(bisect.bisect_right(self._lowers, estimate) - 1, 0)

    def reaching(self, estimate: float) -> int:
        """How many outcomes were estimated at ``estimate`` or longer: the evidence the
        curve has there."""
        return len(self._estimates) - bisect.bisect_left(self._estimates, estimate)


def _share(block: list[float]) -> float:
    return block[0] / block[1]
