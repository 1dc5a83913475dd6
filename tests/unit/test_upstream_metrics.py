"""Reading an engine's load from its Prometheus text."""

from __future__ import annotations

from kefu.engine.upstream_metrics import EngineLoad, parse_load

VLLM = """\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 3.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 2.0
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 9.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.42
"""

KEFU = """\
# HELP kefu_requests_waiting Requests waiting for an engine slot.
# TYPE kefu_requests_waiting gauge
kefu_requests_waiting 7.0
kefu_prefix_cache_hit_ratio 0.8125
kefu_requests_running 8.0
"""


def test_vllm_queue_sums_its_series_and_kv_use_is_read() -> None:
    assert parse_load(VLLM.splitlines()) == EngineLoad(queue=5.0, kv_usage=0.42)


def test_a_kefu_upstream_reports_its_waiting_line_and_prefix_hits() -> None:
    load = parse_load(KEFU.splitlines())
    assert load == EngineLoad(queue=7.0, prefix_hit_ratio=0.8125)


def test_sglang_and_llama_server_names_and_garbage() -> None:
    text = [
        'sglang:num_queue_reqs{model_name="m"} 4',
        "llamacpp:requests_deferred 1",
        'sglang:token_usage{model_name="m"} 0.5',
        "llamacpp:requests_deferred not-a-number",
        "",
        "nonsense",
    ]
    assert parse_load(text) == EngineLoad(queue=5.0, kv_usage=0.5)
    assert parse_load([]) == EngineLoad()
