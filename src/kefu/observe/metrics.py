"""Prometheus metrics: one registry per app (no process-global state), base units, low cardinality.

Histograms and counters are fed by finished requests; gauges (load, KV, cache)
are read from the engine and admission at scrape time, so they are never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kefu.engine.base import EngineStats, UpstreamStats
from kefu.limits.admission import Admission
from kefu.memory.keeper import MemoryWork
from kefu.observe.records import RequestRecord

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Chat latencies: from a cache hit (ms) to an overloaded CPU box (tens of seconds).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60)
TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.2, 0.5, 1)
STAGE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
KNOWN_ROUTES = {
    "/",
    "/chat",
    "/sessions/{session_id}",
    "/v1/chat/completions",
    "/v1/models",
    "/health",
    "/ready",
    "/metrics",
    "/stats",
    "/diagnose",
    "/dashboard",
}


class Metrics:
    def __init__(self, load: Callable[[], LoadSnapshot]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "kefu_http_requests",
            "HTTP requests by route and status.",
            ["route", "status"],
            registry=r,
        )
        self.answers = Counter(
            "kefu_answers", "Answers by the tier that produced them.", ["tier"], registry=r
        )
        self.errors = Counter("kefu_errors", "Failed answers by error code.", ["code"], registry=r)
        self.ttft = Histogram(
            "kefu_ttft_seconds",
            "Request received to first token.",
            ["tier"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "kefu_e2e_seconds",
            "Request received to last byte sent.",
            ["tier"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tpot = Histogram(
            "kefu_tpot_seconds", "(E2E - TTFT) / (tokens - 1).", buckets=TOKEN_BUCKETS, registry=r
        )
        self.queue = Histogram(
            "kefu_queue_wait_seconds",
            "Admitted to prefill started.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.prefill = Histogram(
            "kefu_prefill_seconds",
            "Prefill started to first token.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.gateway = Histogram(
            "kefu_gateway_seconds",
            "Time in kefu itself: E2E less queue, prefill and decode.",
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            "kefu_stage_seconds",
            "Time to reach each stage from the previous one.",
            ["stage"],
            buckets=(*STAGE_BUCKETS, 10, 30),
            registry=r,
        )
        self.fitted = Counter(
            "kefu_fitted_prompts",
            "/chat prompts built shorter to be read within the TTFT SLO (--fit-to-slo).",
            registry=r,
        )
        self.tokens = Counter(
            "kefu_tokens",
            "Tokens by kind: prompt, cached_prompt, completion; fitted_out: /chat prompt "
            "tokens left out to be read within the TTFT SLO (--fit-to-slo).",
            ["kind"],
            registry=r,
        )
        # Auth, limits and Redis.
        self.auth_failures = Counter(
            "kefu_auth_failures",
            "Requests refused by auth, by reason (missing, unknown_key, revoked, expired, "
            "wrong_audience, bad_algorithm, bad_signature, scope, ...).",
            ["reason"],
            registry=r,
        )
        self.limit_rejections = Counter(
            "kefu_limit_rejections",
            "Requests refused with 429, by limit: rate (token bucket) or streams.",
            ["limit"],
            registry=r,
        )
        self.limits_without_redis = Counter(
            "kefu_limits_redis_down",
            "Limit checks Redis could not answer in time, decided by --limits-on-redis-down.",
            registry=r,
        )
        self.redis_seconds = Histogram(
            "kefu_redis_seconds",
            "Redis call latency by operation.",
            ["op"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.redis_errors = Counter(
            "kefu_redis_errors",
            "Redis calls that failed or timed out, by operation.",
            ["op"],
            registry=r,
        )
        self.engine_ttft = Histogram(
            "kefu_engine_ttft_seconds",
            "Remote engine: request sent to its first token, by engine and its model group.",
            ["group", "engine"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.group_ttft = Histogram(
            "kefu_group_ttft_seconds",
            "LLM answers: request received to first token, by model group.",
            ["group"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        r.register(_LoadCollector(load))

    def observe(self, record: RequestRecord) -> None:
        route = record.route if record.route in KNOWN_ROUTES else "other"
        self.requests.labels(route, str(record.status)).inc()
        if not record.answered:
            return
        if record.error:
            # Counted, but kept out of the latency histograms: a 404 in 1 ms is no answer.
            self.errors.labels(record.error).inc()
            return
        tier = record.tier or "none"
        self.answers.labels(tier).inc()
        self.e2e.labels(tier).observe(record.e2e_ms / 1000)
        for histogram, value in (
            (self.ttft.labels(tier), record.ttft_ms),
            (self.tpot, record.tpot_ms),
            (self.queue, record.queue_ms),
            (self.prefill, record.prefill_ms),
            (self.gateway, record.gateway_ms),
        ):
            if value is not None:
                histogram.observe(value / 1000)
        for stage, ms in record.stages_ms.items():
            self.stage.labels(stage).observe(ms / 1000)
        if record.engine is not None and record.upstream_ttft_ms is not None:
            self.engine_ttft.labels(record.group or "", record.engine).observe(
                record.upstream_ttft_ms / 1000
            )
        if record.group is not None and record.ttft_ms is not None:
            self.group_ttft.labels(record.group).observe(record.ttft_ms / 1000)
        self.tokens.labels("prompt").inc(record.prompt_tokens)
        self.tokens.labels("cached_prompt").inc(record.cached_tokens)
        self.tokens.labels("completion").inc(record.completion_tokens)
        if record.fitted_tokens:
            self.fitted.inc()
            self.tokens.labels("fitted_out").inc(record.fitted_tokens)

    def redis_call(self, op: str, seconds: float, failed: bool) -> None:
        # Operations are a fixed set of names (session.resume, limits, lock, ...).
        self.redis_seconds.labels(op).observe(seconds)
        if failed:
            self.redis_errors.labels(op).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


@dataclass(frozen=True, slots=True)
class GroupLoad:
    """One model group's admission right now."""

    name: str
    running: int
    waiting: int
    refused: Mapping[str, int]


class LoadSnapshot:
    """What the engine and admission report right now."""

    def __init__(
        self,
        engine: EngineStats,
        admitted: int,
        waiting: int,
        ready: bool,
        memory: MemoryWork | None = None,
        admission: Admission | None = None,
        groups: tuple[GroupLoad, ...] = (),
    ) -> None:
        self.engine = engine
        self.admitted = admitted
        self.waiting = waiting
        self.ready = ready
        self.memory = memory or MemoryWork()
        self.admission = admission
        self.groups = groups


class _LoadCollector(Collector):
    def __init__(self, load: Callable[[], LoadSnapshot]) -> None:
        self.load = load

    def collect(self) -> Iterator[Metric]:
        snap = self.load()
        stats = snap.engine
        hit_ratio = stats.prefix_reused_tokens / stats.prompt_tokens if stats.prompt_tokens else 0
        for name, doc, value in (
            ("kefu_ready", "1 once the model is loaded and warmed up.", float(snap.ready)),
            ("kefu_requests_running", "Requests holding an engine slot.", snap.admitted),
            ("kefu_requests_waiting", "Requests waiting for an engine slot.", snap.waiting),
            ("kefu_engine_slots", "Sequences the engine decodes together.", stats.slots),
            ("kefu_engine_running_sequences", "Sequences in the engine.", stats.running),
            (
                "kefu_engine_background_sequences",
                "Of those, background work (read ahead, warm-ups) that yields to customers.",
                stats.background,
            ),
            (
                "kefu_kv_cells_used",
                "KV cache cells held by running sequences.",
                stats.kv_used_cells,
            ),
            ("kefu_kv_cells", "KV cache cells in all.", stats.kv_total_cells),
            (
                "kefu_prefix_cache_entries",
                "Copies of finished replies' KV kept in host memory for reuse.",
                stats.prefix_cache_entries,
            ),
            (
                "kefu_prefix_cache_hit_ratio",
                "Share of prompt tokens whose KV was reused.",
                hit_ratio,
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        yield from _memory_metrics(snap.memory)
        if snap.admission is not None:
            yield from _admission_metrics(snap.admission)
        if snap.groups:
            yield from _group_metrics(snap.groups)
        if stats.engines:
            yield from _engine_metrics(stats.engines)


def _memory_metrics(work: MemoryWork) -> Iterator[Metric]:
    """The long-conversation memory's work (--memory summary), so its cost can be read."""
    for name, doc, value in (
        ("kefu_memory_folds", "Turns folded into a session's memory (code).", work.folds),
        (
            "kefu_memory_model_summaries",
            "Model summaries that replaced the quoted summary.",
            work.model_summaries,
        ),
        (
            "kefu_memory_summary_failures",
            "Model summaries that failed or ran past --summary-timeout.",
            work.failures,
        ),
        (
            "kefu_memory_summary_seconds",
            "Seconds spent waiting for model summaries (background engine work).",
            work.summary_seconds,
        ),
    ):
        yield CounterMetricFamily(name, doc, value=value)


def _admission_metrics(admission: Admission) -> Iterator[Metric]:
    """Admission's predictions against their outcomes (``limits/outcomes.py``)."""
    outcomes = admission.outcomes
    ratios = outcomes.ratios
    yield HistogramMetricFamily(
        "kefu_admission_ttft_ratio",
        "Admitted requests' realized first-token time over the time admission predicted.",
        buckets=ratios.cumulative(),
        sum_value=ratios.total,
    )
    yield GaugeMetricFamily(
        "kefu_admission_correction",
        "Factor from the rates' estimate to the prediction: the recent realized/estimated "
        "at --admission-quantile.",
        value=outcomes.correction(),
    )
    confusion = outcomes.confusion
    judged = CounterMetricFamily(
        "kefu_admission_judged",
        "Admitted requests by what the prediction said (refuse: under --admission-shadow or "
        "before calibration) and whether the first token missed --ttft-slo.",
        labels=["prediction", "slo"],
    )
    for prediction, slo, value in (
        ("refuse", "missed", confusion.refused_missed),
        ("refuse", "made", confusion.refused_made),
        ("admit", "missed", confusion.admitted_missed),
        ("admit", "made", confusion.admitted_made),
    ):
        judged.add_metric([prediction, slo], value)
    yield judged
    refusals = CounterMetricFamily(
        "kefu_admission_refusals",
        "Requests admission refused, by code and whether an engine slot was free then.",
        labels=["code", "slot"],
    )
    for code, total in admission.refused.items():
        free = admission.refused_with_free_slot[code]
        refusals.add_metric([code, "free"], free)
        refusals.add_metric([code, "full"], total - free)
    yield refusals


def _group_metrics(groups: tuple[GroupLoad, ...]) -> Iterator[Metric]:
    """Each model group's admission: its own slots, line and refusals."""
    running = GaugeMetricFamily(
        "kefu_group_requests_running", "Requests holding a slot of the group.", labels=["group"]
    )
    waiting = GaugeMetricFamily(
        "kefu_group_requests_waiting",
        "Requests waiting for a slot of the group.",
        labels=["group"],
    )
    refused = CounterMetricFamily(
        "kefu_group_refusals",
        "Requests the group's admission refused, by reason.",
        labels=["group", "reason"],
    )
    for group in groups:
        running.add_metric([group.name], group.running)
        waiting.add_metric([group.name], group.waiting)
        for reason, count in group.refused.items():
            refused.add_metric([group.name, reason], count)
    yield from (running, waiting, refused)


BREAKER_VALUES = {"closed": 0, "half-open": 1, "open": 2}


def _engine_metrics(rows: tuple[UpstreamStats, ...]) -> Iterator[Metric]:
    """One series per remote engine, labelled by its model group and its name."""
    gauges = {
        "in_flight": GaugeMetricFamily(
            "kefu_engine_in_flight",
            "Requests kefu has sent to the engine.",
            labels=["group", "engine"],
        ),
        "breaker": GaugeMetricFamily(
            "kefu_engine_breaker_state",
            "The engine's circuit breaker: 0 closed, 1 half-open, 2 open.",
            labels=["group", "engine"],
        ),
        "healthy": GaugeMetricFamily(
            "kefu_engine_healthy",
            "1 when the last health check passed.",
            labels=["group", "engine"],
        ),
        "queue": GaugeMetricFamily(
            "kefu_engine_queue",
            "Requests waiting inside the engine, from its own /metrics.",
            labels=["group", "engine"],
        ),
        "kv_usage": GaugeMetricFamily(
            "kefu_engine_kv_usage",
            "Share of the engine's KV cache in use.",
            labels=["group", "engine"],
        ),
    }
    counters = {
        "requests": CounterMetricFamily(
            "kefu_engine_requests", "Requests sent to the engine.", labels=["group", "engine"]
        ),
        "failures": CounterMetricFamily(
            "kefu_engine_failures",
            "Requests the engine failed (refused, timed out, broke off).",
            labels=["group", "engine"],
        ),
        "timeouts": CounterMetricFamily(
            "kefu_engine_first_token_timeouts",
            "Requests the engine sent no token for within --first-token-timeout.",
            labels=["group", "engine"],
        ),
    }
    for row in rows:
        labels = [row.group, row.name]
        gauges["in_flight"].add_metric(labels, row.in_flight)
        gauges["breaker"].add_metric(labels, BREAKER_VALUES[row.breaker])
        gauges["healthy"].add_metric(labels, float(row.healthy))
        if row.queue is not None:
            gauges["queue"].add_metric(labels, row.queue)
        if row.kv_usage is not None:
            gauges["kv_usage"].add_metric(labels, row.kv_usage)
        counters["requests"].add_metric(labels, row.requests)
        counters["failures"].add_metric(labels, row.failures)
        counters["timeouts"].add_metric(labels, row.timeouts)
    yield from gauges.values()
    yield from counters.values()
