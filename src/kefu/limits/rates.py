"""What admission measures of the engine: how long a request holds its slot, how long
the engine takes to read a prompt, and how that time grows with the prompt's length.

Each follows the engine within a few requests (the newest samples weigh most), and each
keeps a spread besides its mean, so a prediction can allow for the slow ones.
"""

from __future__ import annotations

# Weight of the newest completion in the averages: about the last ten count.
EWMA_WEIGHT = 0.2

# How far above its mean a prompt's reading (or a reply's hold) is judged to run: mean
# deviations added to the mean, as TCP's retransmit timer allows for the spread of round
# trips (RFC 6298 adds four). A request admitted at the SLO's edge by its mean alone misses
# it about half the time. The SLO is kept at p99, and a roughly normal spread's 99th
# percentile is 2.33 sigma, about 2.9 mean deviations: three. (Two, the 95th percentile,
# left one or two of ~30 accepted LLM answers past the SLO at 10x load.)
DEVIATIONS = 3.0

# How much less each older prompt weighs in the fit of reading time against length: the
# weights sum to 1 / (1 - FORGET), about the last ten prompts, as in the averages.
FORGET = 0.9


class Ewma:
    """An exponentially weighted mean and mean deviation; None until the first sample."""

    def __init__(self, weight: float = EWMA_WEIGHT) -> None:
        self.weight = weight
        self.value: float | None = None
        self.deviation = 0.0

    def add(self, sample: float) -> None:
        sample = max(sample, 0.0)
        if self.value is None:
            # RFC 6298's start: half the first sample, a spread not yet seen is not zero.
            self.value, self.deviation = sample, sample / 2
            return
        self.deviation += self.weight * (abs(sample - self.value) - self.deviation)
        self.value += self.weight * (sample - self.value)

    @property
    def upper(self) -> float | None:
        """The mean plus DEVIATIONS mean deviations: what a sample is not likely to exceed."""
        return None if self.value is None else self.value + DEVIATIONS * self.deviation


class PromptReading:
    """Seconds the engine takes to read a prompt with ``tokens`` tokens left to read (what
    its prefix cache does not hold): a line, ``fixed + tokens x per_token``, fitted by
    least squares to the recent prompts (each older one weighing FORGET times less), and
    the mean deviation of prompts from it.

    Per prompt alone, one number stood for a conversation's fifth turn, whose history the
    engine reads anew (~300 tokens, 1.2-1.9 s on the 2-core box while seven others
    decoded), and for a repeated question read from the cache (one token, 0.2 s). The
    fixed part is about one engine step, which even a cached prompt waits for; the slope
    is the engine's reading speed, set by whatever else its cores do."""

    def __init__(self, forget: float = FORGET, weight: float = EWMA_WEIGHT) -> None:
        self.forget = forget
        self.weight = weight
        self.samples = 0
        # How far prompts stray from the line (a mean, seconds), and the line's mean at
        # the same prompts: their ratio is the spread as a share of the line.
        self.deviation = 0.0
        self._typical = 0.0
        # Tokens a prompt leaves to read, for a prompt not built yet.
        self.tokens = Ewma(weight)
        # Weighted sums: weight, tokens, seconds, tokens², tokens x seconds.
        self._n = self._x = self._y = self._xx = self._xy = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        if self.samples:
            said = self.seconds(tokens)
            self.deviation += self.weight * (abs(seconds - said) - self.deviation)
            self._typical += self.weight * (said - self._typical)
        else:
            # As Ewma starts: a spread not yet seen is not zero, but half the sample.
            self.deviation, self._typical = seconds / 2, seconds
        keep = self.forget
        self._n = keep * self._n + 1
        self._x = keep * self._x + tokens
        self._y = keep * self._y + seconds
        self._xx = keep * self._xx + tokens * tokens
        self._xy = keep * self._xy + tokens * seconds
        self.samples += 1
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
    def spread(self) -> float:
        """The mean deviation from the line as a share of it (0.2: prompts stray 20 %)."""
        return self.deviation / self._typical if self._typical > 0 else 0.0

    def upper(self, tokens: int) -> float:
        """What reading ``tokens`` is not likely to exceed: the line plus DEVIATIONS mean
        deviations, in proportion to the prompt. A busy box slows the engine by a factor,
        so a long prompt strays by more seconds than a short one: a spread in seconds
        let through prompts of 220-450 tokens read up to twice as slowly as the line
        said, and gave a cached prompt's 0.2 s a margin of half a second."""
        return self.seconds(tokens) * (1 + DEVIATIONS * self.spread)


class ServiceRate:
    """What the engine's requests tell of it: how long a completed one held its slot, and
    how long the engine took to read one prompt (sampled at each first token, so the
    estimate follows the engine within a few requests, not a few whole replies): per
    prompt (``prefill``, for a request whose prompt is not built yet) and against the
    prompt's length (``reading``, for one whose prompt is)."""

    def __init__(self, weight: float = EWMA_WEIGHT) -> None:
        self.service = Ewma(weight)
        self.prefill = Ewma(weight)
        self.reading = PromptReading(weight=weight)
        self.completed = 0

    def record(self, held: float) -> None:
        """A request ran to its end after holding its slot ``held`` seconds."""
        self.completed += 1
        self.service.add(held)

    def slot_wait(self, ahead: int, slots: int, oldest_running: float | None) -> float:
        """Seconds until a slot frees for a request with ``ahead`` waiting before it: a
        slot frees every ``service / slots`` seconds. ``service`` at its upper bound:
        replies run from a few tokens to --max-tokens, and a slot judged free by the mean
        hold came 1.2 s late for a prompt admitted on it. Before any completion the age of
        the oldest running request stands in; 0 with no evidence at all."""
        service = self.service.upper if self.service.value is not None else oldest_running
        return 0.0 if service is None else (ahead + 1) * service / slots

    def predicted_ttft(
        self,
        *,
        ahead: int,
        slots: int,
        slot_free: bool,
        reading: int = 0,
        oldest_running: float | None = None,
        read_so_far: float | None = None,
    ) -> float | None:
        """Seconds from now to the first token of a request with ``ahead`` waiting before
        it and ``reading`` admitted requests whose prompts are not yet read.
        ``oldest_running``: the age of the oldest running request, standing in for the
        service time before any completion; ``read_so_far``: how long the prompt being read
        has taken, a floor under ``prefill``. None when there is no evidence at all."""
        prefill = self.prefill.upper
        if read_so_far is not None:
            prefill = max(prefill or 0.0, read_so_far)
        if self.service.value is None and oldest_running is None and prefill is None:
            return None
        slot_wait = 0.0 if slot_free else self.slot_wait(ahead, slots, oldest_running)
        prefill = prefill or 0.0
        prompts_ahead = reading + (0 if slot_free else ahead)
        return max(slot_wait, prompts_ahead * prefill) + prefill
