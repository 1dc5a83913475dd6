"""Latency and throughput of a run, derived from raw per-request timestamps. Pure maths, no I/O.

Definitions, for a record ``r`` (see ``kefu.bench.record``). Latencies exist only for
successful requests (``status == "ok"``); failures are counted in the error and timeout rates.

- **TTFT** (time to first token) = ``r.first_content - r.sent``: until the first event that
  carries *non-empty* reply text. An empty first chunk (OpenAI's role-only delta, which vLLM's
  benchmark counts) does not count. Undefined for an empty reply.
- **E2E** (end to end) = ``r.end - r.sent``.
- **tokens** = the server's ``usage.completion_tokens`` where it reports one (kefu's ``done``
  event; the usage chunk ``--api openai`` asks for), else the number of content chunks.
- **TPOT** (time per output token after the first) = ``(E2E - TTFT) / (tokens - 1)``;
  undefined for a reply of one token or none. It excludes TTFT (guidellm's includes it).
- **ITL** (inter-token latency) = each gap between successive content chunks of one request,
  pooled over the requests. A chunk that carries several tokens is one gap.
- **Percentiles**: linear interpolation between closest ranks (numpy's default); nan when
  there is no value.
- **Window** = last ``end`` - first ``sent`` over a level's requests; throughputs divide by it.
- **Request throughput** = successful requests / window; **token throughput** = their tokens /
  window.
- **Goodput** = successful requests that meet every SLO bound / window (DistServe's sense):
  TTFT <= ttft (an empty reply's TTFT is taken as its E2E: the whole answer was there), TPOT <=
  tpot (a one-token reply meets it), E2E <= e2e. **SLO attainment** = that count / requests.
- **SLO p99** (what the knee reads): the p99 of a bounded metric over *all* requests, a failed
  or timed-out request counting as infinitely late; so about 1 % failures breaks the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kefu.bench.record import RequestRecord
from kefu.bench.slo import Slo

K = TypeVar("K", bound=Hashable)

INF = math.inf
NAN = math.nan


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (q in 0..100) by linear interpolation; NaNs left out; nan if empty.

    Infinite values are allowed (a failure counted as infinitely late): a percentile that
    falls between a finite value and an infinite one is infinite.
    """
    ordered = sorted(v for v in values if not math.isnan(v))
    if not ordered:
        return NAN
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    if fraction == 0 or ordered[low] == ordered[high]:
        return ordered[low]
    if math.isinf(ordered[high]):
        return ordered[high]
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def ttft(r: RequestRecord) -> float | None:
    """Seconds from sending to the first non-empty content; None if failed or empty."""
    if not r.ok or r.first_content is None:
        return None
    return r.first_content - r.sent


def e2e(r: RequestRecord) -> float | None:
    """Seconds from sending to the end of the response; None if the request failed."""
    return r.end - r.sent if r.ok else None


def tokens(r: RequestRecord) -> int:
    """Reply tokens: the server's count where it gave one, else the content chunks."""
    return r.completion_tokens if r.completion_tokens is not None else len(r.chunks)


def tpot(r: RequestRecord) -> float | None:
    """(E2E - TTFT) / (tokens - 1); None if failed, empty, or a single token."""
    first, total, n = ttft(r), e2e(r), tokens(r)
    if first is None or total is None or n < 2:
        return None
    return (total - first) / (n - 1)


def itl(r: RequestRecord) -> list[float]:
    """Gaps between successive content chunks of a successful request."""
    if not r.ok:
        return []
    return [b - a for a, b in zip(r.chunks, r.chunks[1:], strict=False)]


def window(records: Sequence[RequestRecord]) -> float:
    """Seconds from the first request sent to the last one ended; 0 for none."""
    if not records:
        return 0.0
    return max(r.end for r in records) - min(r.sent for r in records)


def slo_value(r: RequestRecord, metric: str) -> float:
    """A request's value for an SLO check: failures are infinitely late, undefined meets it."""
    if not r.ok:
        return INF
    if metric == "ttft":
        first = ttft(r)
        return first if first is not None else r.end - r.sent
    if metric == "tpot":
        per_token = tpot(r)
        return per_token if per_token is not None else 0.0
    return r.end - r.sent


def meets_slo(r: RequestRecord, slo: Slo) -> bool:
    return r.ok and all(slo_value(r, m) <= bound for m, bound in slo.bounds().items())


@dataclass(frozen=True)
class Dist:
    """How a latency is spread: count, mean and percentiles, in seconds (nan for no values)."""

    n: int
    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Dist:
        mean = sum(values) / len(values) if values else NAN
        return cls(
            len(values),
            mean,
            percentile(values, 50),
            percentile(values, 90),
            percentile(values, 99),
        )


@dataclass(frozen=True)
class Summary:
    """Everything reported for one group of requests (a level, or a tier or turn within it)."""

    requests: int
    ok: int
    errors: int
    timeouts: int
    empty: int  # successful replies without any content
    error_rate: float
    timeout_rate: float
    window_s: float
    tokens: int
    request_throughput: float
    token_throughput: float
    goodput: float
    slo_attainment: float
    ttft: Dist
    tpot: Dist
    itl: Dist
    e2e: Dist
    slo_p99: dict[str, float] = field(default_factory=dict)

    def meets(self, slo: Slo) -> bool:
        """Each bounded metric's SLO p99 (failures infinitely late) is within its bound."""
        return self.requests > 0 and all(
            self.slo_p99[m] <= bound for m, bound in slo.bounds().items()
        )


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else NAN


def summarize(records: Sequence[RequestRecord], slo: Slo, window_s: float | None = None) -> Summary:
    """Summarise ``records``; ``window_s`` (default: theirs) divides the throughputs."""
    span = window(records) if window_s is None else window_s
    n = len(records)
    ok = [r for r in records if r.ok]
    errors = sum(r.status == "error" for r in records)
    timeouts = sum(r.status == "timeout" for r in records)
    total_tokens = sum(tokens(r) for r in ok)
    good = sum(meets_slo(r, slo) for r in records)
    return Summary(
        requests=n,
        ok=len(ok),
        errors=errors,
        timeouts=timeouts,
        empty=sum(r.first_content is None for r in ok),
        error_rate=errors / n if n else NAN,
        timeout_rate=timeouts / n if n else NAN,
        window_s=span,
        tokens=total_tokens,
        request_throughput=_rate(len(ok), span),
        token_throughput=_rate(total_tokens, span),
        goodput=_rate(good, span),
        slo_attainment=good / n if n else NAN,
        ttft=Dist.of([v for r in ok if (v := ttft(r)) is not None]),
        tpot=Dist.of([v for r in ok if (v := tpot(r)) is not None]),
        itl=Dist.of([gap for r in ok for gap in itl(r)]),
        e2e=Dist.of([v for r in ok if (v := e2e(r)) is not None]),
        slo_p99={m: percentile([slo_value(r, m) for r in records], 99) for m in slo.bounds()},
    )


def split(
    records: Sequence[RequestRecord],
    key: Callable[[RequestRecord], K],
    slo: Slo,
    window_s: float | None = None,
) -> dict[K, Summary]:
    """One Summary per key value, in sorted key order; throughputs over the whole window,
    so the groups' throughputs add up to the level's."""
    span = window(records) if window_s is None else window_s
    groups: dict[K, list[RequestRecord]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    return {k: summarize(groups[k], slo, span) for k in sorted(groups)}  # type: ignore[type-var]


def tier_of(r: RequestRecord) -> str:
    """The answer tier from kefu's done event; 'unknown' where the stream did not say."""
    return r.tier or "unknown"


def turn_of(r: RequestRecord) -> int:
    return r.turn
