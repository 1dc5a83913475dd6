"""``--calibrate``: scale the roofline with what a real ``kefu bench`` run measured.

Each level of the run gives its LLM answers' arrival rate, mean TTFT and TPOT, reply
length and (from requests.jsonl beside summary.json) prompt tokens that were not served
from the prefix cache. The planner estimates the same level on the device the bench ran
against; the decode and prefill time scales that bring the estimates closest to the
measurements become the scales of every later estimate. The scales are fitted together (TTFT
holds some decode time, TPOT some prefill interference), by least squares in log space.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kefu.plan import PlanError
from kefu.plan.sizing import Load, load_at, load_at_rate
from kefu.plan.speed import Efficiency, Speed
from kefu.plan.traffic import Traffic

FORMAT = "kefu-bench/1"
REQUESTS_FILE = "requests.jsonl"


@dataclass(frozen=True, slots=True)
class Observed:
    """One bench level's LLM answers."""

    load: float  # the level's users or sessions/s
    chats: float | None  # a closed loop (--users): the users whose turns went to the LLM
    think_s: float
    rate: float  # LLM turns a second
    tokens_in: float  # prompt tokens not found in the prefix cache, mean
    tokens_out: float
    ttft_s: float  # means
    tpot_s: float


@dataclass(frozen=True, slots=True)
class Compared:
    observed: Observed
    raw: Load | None  # the estimate before calibration; None: it could not carry the level
    calibrated: Load


@dataclass(frozen=True, slots=True)
class Calibration:
    source: str
    label: str  # the bench run's own label: what it measured
    device: str
    rows: list[Compared]
    decode_scale: float
    prefill_scale: float
    tokens_in_from: str  # requests.jsonl, or the --tokens-in it fell back to


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _prompt_tokens(path: Path) -> dict[int, float]:
    """Mean uncached prompt tokens of each level's successful LLM requests."""
    sums: dict[int, list[float]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        prompt = record.get("prompt_tokens") if isinstance(record, dict) else None
        if not isinstance(prompt, int) or record.get("status") != "ok":
            continue
        if record.get("tier") not in (None, "llm"):
            continue
        cached = record.get("cached_prompt_tokens") or 0
        sums.setdefault(int(record.get("level", 0)), []).append(prompt - cached)
    return {level: sum(v) / len(v) for level, v in sums.items() if v}


def _mean_think(spec: str) -> float:
    """The mean of the bench's think-time spec as its summary writes it: 'none',
    '0.5 s (exponential mean)' or '1-3 s (uniform)'."""
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", spec)]
    return sum(numbers) / len(numbers) if numbers else 0.0


def _llm_summary(level: dict[str, Any]) -> dict[str, Any] | None:
    tiers = level.get("by_tier") or {}
    if "llm" in tiers:
        return dict(tiers["llm"])
    # A plain OpenAI server names no tier: every answer came from the model.
    return dict(level["summary"]) if set(tiers) <= {"unknown"} else None


def read_bench(path: Path, default_tokens_in: float) -> tuple[str, list[Observed], str]:
    """(the run's label, its levels with LLM answers, where prompt sizes came from)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PlanError(f"{path}: not a kefu bench summary.json (format {FORMAT})")
    prompts = _prompt_tokens(path.with_name(REQUESTS_FILE))
    closed = (data.get("run") or {}).get("mode") == "users"
    think = _mean_think(str((data.get("workload") or {}).get("think", "none")))
    observed = []
    for level in data.get("levels", []):
        summary = _llm_summary(level)
        if summary is None:
            continue
        rate = _number(summary.get("request_throughput"))
        ttft = _number((summary.get("ttft") or {}).get("mean"))
        tpot = _number((summary.get("tpot") or {}).get("mean"))
        ok, tokens = summary.get("ok") or 0, summary.get("tokens") or 0
        if not (rate and ttft and tpot and ok and tokens):
            continue
        load = float(level.get("load", 0))
        # Users split their time between LLM turns and fast answers, in proportion.
        everything = _number((level.get("summary") or {}).get("requests")) or 0
        share = min(1.0, summary.get("requests", ok) / everything) if everything else 1.0
        observed.append(
            Observed(
                load=load,
                chats=load * share if closed else None,
                think_s=think,
                rate=rate,
                tokens_in=prompts.get(int(level.get("index", 0)), default_tokens_in),
                tokens_out=tokens / ok,
                ttft_s=ttft,
                tpot_s=tpot,
            )
        )
    if not observed:
        raise PlanError(f"{path}: no level with timed LLM answers (TTFT and TPOT) to compare")
    source = REQUESTS_FILE if prompts else f"--tokens-in {default_tokens_in:g}"
    return str(data.get("label", path)), observed, source


def _estimate(speed: Speed, seen: Observed) -> Load | None:
    """The model of the level: a closed loop of its users, or its arrival rate."""
    if seen.chats is None:
        return load_at_rate(speed, seen.tokens_in, seen.tokens_out, seen.rate)
    loop = Traffic(
        tokens_in=seen.tokens_in,
        tokens_out=seen.tokens_out,
        concurrent_chats=seen.chats,
        think_s=seen.think_s,
        headroom=0,
    )
    return load_at(speed, loop, seen.chats)


def _misfit(speed: Speed, observed: list[Observed]) -> float:
    """Squared log errors of TTFT and TPOT over the levels; inf if a level is out of reach."""
    total = 0.0
    for seen in observed:
        load = _estimate(speed, seen)
        if load is None:
            return math.inf
        total += math.log(load.ttft_s / seen.ttft_s) ** 2
        total += math.log(load.tpot_s / seen.tpot_s) ** 2
    return total


def _fit(speed: Speed, observed: list[Observed]) -> Efficiency:
    """The decode and prefill scales that fit the levels best: a grid over 1/100x-100x in
    steps of 10^0.1, then a finer one around the best point (two numbers, a few levels:
    a search is cheap and cannot diverge where the model has no steady state)."""
    base = speed.efficiency
    best = (math.inf, 0.0, 0.0)
    for step, span, centre in ((0.1, 20, (0.0, 0.0)), (0.01, 10, None)):
        middle = centre if centre is not None else (best[1], best[2])
        for i in range(-span, span + 1):
            for j in range(-span, span + 1):
                logs = (middle[0] + i * step, middle[1] + j * step)
                trial = replace(base, decode_scale=10 ** logs[0], prefill_scale=10 ** logs[1])
                error = _misfit(speed.with_efficiency(trial), observed)
                if error < best[0]:
                    best = (error, *logs)
    if math.isinf(best[0]):
        raise PlanError(
            "no scaling of the estimate carries the bench's load: is --calibrated-on the "
            "device its server ran on?"
        )
    return replace(base, decode_scale=10 ** best[1], prefill_scale=10 ** best[2])


def calibrate(path: Path, speed: Speed, default_tokens_in: float) -> Calibration:
    label, observed, tokens_from = read_bench(path, default_tokens_in)
    efficiency = _fit(speed, observed)
    fitted = speed.with_efficiency(efficiency)
    rows = []
    for seen in observed:
        raw, calibrated = _estimate(speed, seen), _estimate(fitted, seen)
        if calibrated is None:
            raise PlanError(f"the calibrated estimate cannot carry level {seen.load:g}")
        rows.append(Compared(seen, raw, calibrated))
    return Calibration(
        source=str(path),
        label=label,
        device=speed.device.name,
        rows=rows,
        decode_scale=efficiency.decode_scale,
        prefill_scale=efficiency.prefill_scale,
        tokens_in_from=tokens_from,
    )


def scaled(efficiency: Efficiency, calibration: Calibration) -> Efficiency:
    return replace(
        efficiency,
        decode_scale=calibration.decode_scale,
        prefill_scale=calibration.prefill_scale,
    )
