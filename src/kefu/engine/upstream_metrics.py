"""What a remote engine's own Prometheus ``/metrics`` say about its load.

Read every second or so by the pool's checker, never on the request path. Names differ by
server; each figure sums the series of every name that means it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Requests the engine has accepted but not started: the queue the router balances.
QUEUE_METRICS = frozenset(
    {
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "llamacpp:requests_deferred",
        "kefu_requests_waiting",
    }
)
# Share of the KV cache in use, 0-1.
KV_USAGE_METRICS = frozenset(
    {
        "vllm:gpu_cache_usage_perc",
        "vllm:kv_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    }
)
# Share of prompt tokens served from the prefix cache, 0-1 (a kefu upstream reports it).
PREFIX_HIT_METRICS = frozenset({"kefu_prefix_cache_hit_ratio", "vllm:gpu_prefix_cache_hit_rate"})


@dataclass(frozen=True, slots=True)
class EngineLoad:
    queue: float | None = None
    kv_usage: float | None = None
    prefix_hit_ratio: float | None = None


def parse_load(lines: Iterable[str]) -> EngineLoad:
    """Figures from Prometheus text exposition; a figure no line reports is None."""
    sums: dict[str, float] = {}
    for line in lines:
        if not line or line[0] == "#":
            continue
        name_end = min((i for i in (line.find("{"), line.find(" ")) if i > 0), default=-1)
        if name_end < 0:
            continue
        name = line[:name_end]
        figure = (
            "queue"
            if name in QUEUE_METRICS
            else "kv_usage"
            if name in KV_USAGE_METRICS
            else "prefix_hit_ratio"
            if name in PREFIX_HIT_METRICS
            else None
        )
        if figure is None:
            continue
        try:
            rest = line[line.rindex("}") + 1 :] if line[name_end] == "{" else line[name_end:]
            value = float(rest.split()[0])
        except (ValueError, IndexError):
            continue
        sums[figure] = sums.get(figure, 0.0) + value
    return EngineLoad(**sums)
