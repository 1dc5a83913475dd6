"""What a run leaves: the console tables, ``summary.json`` and ``requests.jsonl``."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kefu.bench.knee import Knee
from kefu.bench.metrics import Summary
from kefu.bench.runner import BenchResult, LevelResult
from kefu.bench.tables import load_text, ms, num, pct, render

FORMAT = "kefu-bench/1"
SUMMARY_FILE = "summary.json"
REQUESTS_FILE = "requests.jsonl"

DEFINITIONS = {
    "units": "seconds; throughputs per second of the level's window",
    "ttft": "first non-empty content - sent (an empty first chunk does not count)",
    "tpot": "(e2e - ttft) / (tokens - 1); undefined for one token",
    "itl": "gaps between successive content chunks, pooled over requests",
    "e2e": "end of the response - sent",
    "tokens": "the server's usage.completion_tokens, else the number of content chunks",
    "percentiles": "linear interpolation between closest ranks; latencies of successful requests",
    "window_s": "last end - first sent over the level's requests",
    "goodput": "successful requests meeting every SLO bound / window",
    "slo_p99": "p99 over all requests, failures counted as infinitely late",
    "knee": "highest load, from the lowest up, that meets the SLO and whose E2E p50 grew "
    "less than max_growth times over the previous (half) load",
}


def jsonable(value: Any) -> Any:
    """Dataclasses to dicts, keys to strings, nan and infinities to null (strict JSON)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def summary_json(result: BenchResult) -> dict[str, Any]:
    config, target = result.config, result.target
    spec = config.workload
    data: dict[str, Any] = jsonable(
        {
            "format": FORMAT,
            "label": config.label or f"{target.api} {target.base}",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(result.started_at)),
            "target": {
                "url": target.base,
                "endpoint": target.endpoint,
                "api": target.api,
                "model": target.model,
            },
            "run": {
                "mode": config.mode,
                "sweep": config.sweep,
                "levels": list(config.levels),
                "requests_per_level": config.requests,
                "duration_s_per_level": config.duration,
                "timeout_s": config.timeout,
                "slo": config.slo.bounds(),
                "max_growth": config.max_growth,
                "wall_s": result.wall_s,
            },
            "workload": {
                "pool": spec.pool.name,
                "turns": str(spec.turns),
                "think": str(spec.think),
                "repeat_share": spec.repeat_share,
                "order_share": spec.order_share,
                "zipf_s": spec.zipf_s,
                "seed": spec.seed,
            },
            "definitions": DEFINITIONS,
            "levels": [
                {
                    "index": lv.plan.index,
                    "load": lv.plan.load,
                    "label": lv.plan.label,
                    "meets_slo": lv.meets_slo,
                    "summary": lv.summary,
                    "by_tier": lv.by_tier,
                    "by_turn": lv.by_turn,
                }
                for lv in result.levels
            ],
            "knee": result.knee,
        }
    )
    return data


def write_results(result: BenchResult, out: Path) -> list[Path]:
    """summary.json and requests.jsonl (one record a line) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    summary = out / SUMMARY_FILE
    summary.write_text(json.dumps(summary_json(result), indent=2, ensure_ascii=False) + "\n")
    requests = out / REQUESTS_FILE
    with requests.open("w", encoding="utf-8") as f:
        for level in result.levels:
            for record in level.records:
                f.write(json.dumps(jsonable(record.to_json()), ensure_ascii=False) + "\n")
    return [summary, requests]


def _unit(result: BenchResult) -> str:
    return "users" if result.config.mode == "users" else "sessions/s"


def _verdicts(result: BenchResult) -> list[str]:
    if result.knee is None:
        return ["yes" if lv.meets_slo else "no" for lv in result.levels]
    verdicts = []
    for check in result.knee.checks:
        text = "pass" if check.passes else "SLO miss" if not check.meets_slo else "latency"
        if check.load == result.knee.load:
            text += " <- knee"
        verdicts.append(text)
    return verdicts


def throughput_rows(result: BenchResult) -> tuple[list[str], list[list[str]]]:
    headers = [_unit(result), "requests", "errors", "timeouts", "req/s", "tok/s"]
    headers += [
        "goodput/s",
        "SLO met",
        "E2E growth",
        "SLO p99 ok" if result.knee is None else "rule",
    ]
    growth = [c.growth for c in result.knee.checks] if result.knee else [None] * len(result.levels)
    rows = []
    for lv, grown, verdict in zip(result.levels, growth, _verdicts(result), strict=True):
        s = lv.summary
        rows.append(
            [
                load_text(lv.plan.load),
                str(s.requests),
                pct(s.error_rate),
                pct(s.timeout_rate),
                num(s.request_throughput),
                num(s.token_throughput, 1),
                num(s.goodput),
                pct(s.slo_attainment),
                "-" if grown is None else f"{grown:.2f}x",
                verdict,
            ]
        )
    return headers, rows


def latency_rows(result: BenchResult) -> tuple[list[str], list[list[str]]]:
    headers = [_unit(result)]
    for metric in ("TTFT", "TPOT", "ITL", "E2E"):
        headers += [f"{metric} p50", "p90", "p99"]
    rows = []
    for lv in result.levels:
        s = lv.summary
        row = [load_text(lv.plan.load)]
        for dist in (s.ttft, s.tpot, s.itl, s.e2e):
            row += [ms(dist.p50), ms(dist.p90), ms(dist.p99)]
        rows.append(row)
    return headers, rows


def split_rows(result: BenchResult, by: str) -> tuple[list[str], list[list[str]]]:
    """One row per (level, tier) or (level, turn); ``by`` is "tier" or "turn"."""
    headers = [_unit(result), by, "requests", "errors", "TTFT p50", "TTFT p99", "TPOT p50"]
    headers += ["E2E p50", "E2E p99", "SLO met"]
    rows = []
    for lv in result.levels:
        groups: dict[Any, Summary] = dict(lv.by_tier) if by == "tier" else dict(lv.by_turn)
        for key, s in groups.items():
            rows.append(
                [
                    load_text(lv.plan.load),
                    str(key),
                    str(s.requests),
                    pct((s.errors + s.timeouts) / s.requests if s.requests else math.nan),
                    ms(s.ttft.p50),
                    ms(s.ttft.p99),
                    ms(s.tpot.p50),
                    ms(s.e2e.p50),
                    ms(s.e2e.p99),
                    pct(s.slo_attainment),
                ]
            )
    return headers, rows


def knee_text(knee: Knee | None, levels: Sequence[LevelResult]) -> str:
    if knee is None:
        return ""
    at = next((lv for lv in levels if lv.plan.load == knee.load), None)
    if knee.status == "found" and at is not None:
        lines = [f"knee: {at.plan.label}; {knee.reason}"]
    else:
        outcome = "not reached" if knee.status == "not_reached" else "none"
        lines = [f"knee: {outcome}; {knee.reason}"]
    if knee.status == "found" and at is not None:
        s = at.summary
        lines.append(
            f"  at {at.plan.label}: {num(s.request_throughput)} req/s, "
            f"{num(s.token_throughput, 1)} tok/s, goodput {num(s.goodput)}/s, "
            f"TTFT p99 {ms(s.ttft.p99)} ms, E2E p50 {ms(s.e2e.p50)} ms"
        )
    lines.append(
        f"  (rule: meets the SLO and E2E p50 grew < {knee.max_growth:g}x over the previous "
        "level, from the lowest level up)"
    )
    return "\n".join(lines)


def console_report(result: BenchResult) -> str:
    config, target = result.config, result.target
    spec = config.workload
    model = f", model {target.model}" if target.model else ""
    head = [
        f"kefu bench: {target.endpoint} ({target.api}{model})",
        f"workload: pool {spec.pool.name}, {spec.turns} turns/session, think {spec.think}, "
        f"repeat share {spec.repeat_share:g} (zipf {spec.zipf_s:g}), order share "
        f"{spec.order_share:g}, seed {spec.seed}",
        f"bounds: {config.requests} requests or {config.duration:g} s per level, "
        f"{config.timeout:g} s per request; SLO {config.slo}; wall time {result.wall_s:.1f} s",
    ]
    parts = ["\n".join(head), "throughput", render(*throughput_rows(result))]
    parts += ["latency (ms, successful requests)", render(*latency_rows(result))]
    parts += ["by answer tier", render(*split_rows(result, "tier"), left=2)]
    parts += ["by turn number", render(*split_rows(result, "turn"), left=2)]
    if result.knee is not None:
        parts.append(knee_text(result.knee, result.levels))
    return "\n\n".join(parts) + "\n"


class BenchFileError(ValueError):
    """A file that is not a kefu bench summary; the message names it."""


def load_summary(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchFileError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BenchFileError(f"{path} is not a kefu bench summary ({SUMMARY_FILE})")
    return data
