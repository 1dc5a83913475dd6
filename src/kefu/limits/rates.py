"""What admission measures of the engine: how long a request holds its slot, how long
the engine takes to read a prompt and how that time grows with the prompt's length, how
long replies run and the gap between two of their tokens, and how much later than the
reading says a first token comes after its slot.

Each follows the engine within a few requests (the newest samples weigh most). All but
the lateness are means: how far the outcomes stray from what they predict is measured on
the outcomes themselves (``outcomes.py``), not assumed here.

A reply's length is counted in the engine's text deltas: one a token from the embedded
engine, less where it holds back half a character or a possible stop string, a chunk
from a remote one. Lengths and the gap between deltas are counted alike, so their product
is a time either way; ``max_tokens`` caps a count of deltas loosely, never too tightly.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Sequence
from itertools import accumulate

from kefu.limits.outcomes import MIN_OUTCOMES
from kefu.limits.outcomes import quantile as nearest_rank

# Weight of the newest completion in the averages: about the last ten count.
EWMA_WEIGHT = 0.2

# Weight of the newest gap between two tokens of a reply: about the last fifty count, a
# few steps of a full engine.
TOKEN_WEIGHT = 0.02
# Completed replies' lengths kept for a running reply's tokens still to come.
LENGTHS_KEPT = 256
# Recent first tokens whose lateness is kept; a quantile of it is used from as many as
# outcomes calibrate a prediction (MIN_OUTCOMES: one full set of default slots).
LATENESS_KEPT = 256
LATENESS_MIN = MIN_OUTCOMES

# How much less each older prompt weighs in the fit of reading time against length: the
# weights sum to 1 / (1 - FORGET), about the last ten prompts, as in the averages.
FORGET = 0.9


class Ewma:
    """An exponentially weighted mean; None until the first sample."""

    def __init__(self, weight: float = EWMA_WEIGHT) -> None:
        self.weight = weight
        self.value: float | None = None

    def add(self, sample: float) -> None:
        sample = max(sample, 0.0)
        if self.value is None:
            self.value = sample
            return
        self.value += self.weight * (sample - self.value)


class PromptReading:
    """Seconds the engine takes to read a prompt with ``tokens`` tokens left to read (what
    its prefix cache does not hold): a line, ``fixed + tokens x per_token``, fitted by
    least squares to the recent prompts (each older one weighing FORGET times less).

    Per prompt alone, one number stood for a conversation's fifth turn, whose history the
    engine reads anew (~300 tokens), and for a repeated question read from the cache (one
    token). The fixed part is about one engine step, which even a cached prompt waits for;
    the slope is the engine's reading speed, set by whatever else its cores do."""

    def __init__(self, forget: float = FORGET, weight: float = EWMA_WEIGHT) -> None:
        self.forget = forget
        self.samples = 0
        # Tokens a prompt leaves to read, for a prompt not built yet.
        self.tokens = Ewma(weight)
        # Weighted sums: weight, tokens, seconds, tokens², tokens x seconds.
        self._n = self._x = self._y = self._xx = self._xy = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        """A prompt of ``tokens`` read in ``seconds``: a sample of the line."""
        seconds = max(seconds, 0.0)
        keep = self.forget
        self._n = keep * self._n + 1
        self._x = keep * self._x + tokens
        self._y = keep * self._y + seconds
        self._xx = keep * self._xx + tokens * tokens
        self._xy = keep * self._xy + tokens * seconds
        self.samples += 1

    def observe(self, tokens: int) -> None:
        """A request's prompt, counted: ``tokens`` left to read. Every counted prompt is
        one, read or refused: learnt only from the prompts read, a server refusing at its
        slots never learnt that its door let through prompts too long to take (under wrk,
        a third of /chat's messages built their prompts only to be refused). The warm-up's
        prompt is none: a first turn's 169 tokens made every 25-token /v1 question look
        seven times as long, and a fresh server refused an 8-stream burst."""
        self.tokens.add(tokens)

    def line(self) -> tuple[float, float]:
        """(fixed seconds, seconds per token), neither below 0; (0, 0) before any sample."""
        n, x, y, xx, xy = self._n, self._x, self._y, self._xx, self._xy
        if not self.samples:
            return 0.0, 0.0
        spread = n * xx - x * x
        # Prompts of one length alone cannot tell the fixed part from the slope: the
        # reading is then taken as proportional, which errs high on a short prompt.
        if spread > 1e-9 * n * xx:
            slope = (n * xy - x * y) / spread
            fixed = (y - slope * x) / n
            if slope < 0:  # longer prompts read faster: noise, the mean says more
                return y / n, 0.0
            if fixed >= 0:
                return fixed, slope
        return 0.0, (xy / xx if xx > 0 else 0.0)

    def seconds(self, tokens: int) -> float:
        fixed, per_token = self.line()
        return fixed + per_token * tokens

    @property
    def typical(self) -> int:
        """Tokens a prompt not built yet is taken to leave: the recent requests' mean, 0
        before the first (its reading is then the line's fixed part)."""
        return round(self.tokens.value or 0.0)


class ReplyLengths:
    """Tokens in the recent completed replies: how many a reply ``emitted`` tokens in is
    still to send. A reply's end is no clock: replies of one server end anywhere from 10
    tokens to their limit, and one 40 tokens in is past most of those shorter ones."""

    def __init__(self, kept: int = LENGTHS_KEPT) -> None:
        self._recent: deque[int] = deque(maxlen=kept)
        self._sorted: list[int] = []
        self._sums: list[int] = [0]  # _sums[i]: the i shortest lengths' total

    def __len__(self) -> int:
        return len(self._recent)

    def add(self, tokens: int) -> None:
        self._recent.append(tokens)
        self._sorted = sorted(self._recent)
        self._sums = [0, *accumulate(self._sorted)]

    def left(self, emitted: int, limit: int | None) -> float:
        """Mean tokens still to come of a reply ``emitted`` tokens in that may send at most
        ``limit``: over the recent replies longer than it, each stopped at the limit.
        Longer than every recent one: half the way to its limit (a quarter of its length
        with none), a guess for the rare reply the recent ones say nothing of."""
        lengths, sums = self._sorted, self._sums
        longer = bisect.bisect_right(lengths, emitted)
        count = len(lengths) - longer
        if count == 0:
            # A closing delta can take a reply one past its limit: never below one more.
            return max(1.0, (limit - emitted) / 2 if limit is not None else emitted / 4)
        capped = len(lengths) if limit is None else bisect.bisect_right(lengths, limit)
        capped = max(capped, longer)
        total = sums[capped] - sums[longer] + (len(lengths) - capped) * (limit or 0)
        return max(1.0, total / count - emitted)


class Lateness:
    """How much longer than the reading line said a request took from its slot to its
    first token, over the recent requests: the step it waited to join, the decodes read
    beside its prompt, and the prompts granted just before it. The line is fitted to
    prompts read one after another (a prompt read in the same step as the one before it
    reads in no time), so it says how long a line of prompts takes, not how long one
    granted now waits for its first token: a request let wait until the line said it
    would just make the SLO would miss it. Measured from the slot, on every request.

    A prompt granted while others were still being read waits for them too: a fresh
    server's first burst, eight prompts granted at once, came 0.3-1.2 s late, where one
    granted alone came 0.01 s late at the median (/v1 streams at twice capacity). Those
    are kept apart: the line's deadline is for a request that takes the slot a finished
    reply freed, mostly alone. Over every grant, the burst's few samples set its margin
    for minutes (a median of 0.1-0.36 s for grants that came 0.01 s late), and shadow
    found the deadline right 92 % of the time; over grants alone, 99 %."""

    def __init__(self, kept: int = LATENESS_KEPT) -> None:
        self._recent: deque[float] = deque(maxlen=kept)
        self._alone: deque[float] = deque(maxlen=kept)
        self._margins: dict[float, float] = {}  # by quantile, until the next sample

    def add(self, seconds: float, *, alone: bool = True) -> None:
        """A first token ``seconds`` later than the line said; ``alone``: its prompt was
        granted with no other being read."""
        self._recent.append(seconds)
        if alone:
            self._alone.append(seconds)
        self._margins.clear()

    def margin(self, quantile: float) -> float:
        """The ``quantile`` of the recent lateness of prompts granted alone (nearest rank),
        none below 0; of every grant while fewer than ``LATENESS_MIN`` were alone; 0 before
        ``LATENESS_MIN`` samples."""
        samples = self._alone if len(self._alone) >= LATENESS_MIN else self._recent
        if len(samples) < LATENESS_MIN:
            return 0.0
        if quantile not in self._margins:
            self._margins[quantile] = max(0.0, nearest_rank(list(samples), quantile))
        return self._margins[quantile]


class ServiceRate:
    """What the engine's requests tell of it: how long a completed one held its slot, how
    long the engine took to read one prompt, against its length (sampled at each first
    token, so the estimate follows the engine within a few requests, not a few whole
    replies), how long its replies run and the time between two of their tokens."""

    def __init__(self, weight: float = EWMA_WEIGHT) -> None:
        self.service = Ewma(weight)
        self.reading = PromptReading(weight=weight)
        self.token_gap = Ewma(TOKEN_WEIGHT)
        self.lengths = ReplyLengths()
        self.lateness = Lateness()
        self.completed = 0

    def record(self, held: float, tokens: int = 0) -> None:
        """A request ran to its end after holding its slot ``held`` seconds and sending
        ``tokens`` tokens (0: not counted)."""
        self.completed += 1
        self.service.add(held)
        if tokens:
            self.lengths.add(tokens)

    def frees_in(self, age: float, emitted: int = 0, limit: int | None = None) -> float:
        """Seconds until a running request frees its slot, ``age`` seconds after it took it
        and ``emitted`` tokens into its reply (of at most ``limit``). Once it sends tokens,
        its tokens still to come at the recent gap between two (``service - age`` alone
        would take a reply 0.2 s from its end and one just begun as alike whenever their
        ages are). Before: what is left of a mean hold; before any completion, as long
        again as it has held."""
        gap = self.token_gap.value
        if emitted and gap is not None and len(self.lengths):
            return self.lengths.left(emitted, limit) * gap
        service = self.service.value
        return age if service is None else max(0.0, service - age)

    def slot_wait(self, ahead: Sequence[float], frees: Sequence[float]) -> float:
        """Seconds until a slot frees for a request behind ``ahead`` (each waiting request's
        seconds left before it gives up, first in line first), when the running requests
        free theirs in ``frees`` seconds (``frees_in``).

        The one that frees first frees first, and a slot taken again frees a mean hold
        (``service``) later; a freed slot goes to the first in line still waiting, and one
        whose patience runs out before then leaves without taking it. Counted as one slot
        every ``service / slots`` seconds, a line of requests about to give up looked as
        long as one of requests about to be served. 0 with nothing running."""
        if not frees:
            return 0.0
        service = self.service.value
        if service is None:
            service = 2 * max(frees)
        frees = list(frees)
        heapq.heapify(frees)
        for patience in ahead:
            if frees[0] <= patience:  # still there when the slot frees: it takes it
                heapq.heapreplace(frees, frees[0] + service)
        return frees[0]
