"""--calibrate: a kefu bench summary.json scales the estimates to what it measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kefu.plan import PlanError
from kefu.plan.calibrate import calibrate
from kefu.plan.catalog import require_builtin
from kefu.plan.hardware import Device
from kefu.plan.precision import precision
from kefu.plan.sizing import load_at, load_at_rate
from kefu.plan.speed import Efficiency, Speed
from kefu.plan.traffic import Traffic

BOX = Device("test CPU", 64, 40, 1.0, None, is_gpu=False, source="given")


def _speed() -> Speed:
    shape = require_builtin("Qwen2.5-0.5B-Instruct")
    weights = precision("q4_0").weight_bytes(shape.params())
    return Speed(shape, weights, shape.kv_values_per_token() * 2, BOX, 1, Efficiency())


def _level(index: int, rate: float, ttft: float, tpot: float, tier: str) -> dict[str, Any]:
    llm = {
        "ok": 20,
        "tokens": 20 * 60,
        "request_throughput": rate,
        "ttft": {"mean": ttft, "p50": ttft},
        "tpot": {"mean": tpot, "p50": tpot},
    }
    other = {**llm, "request_throughput": 5.0, "ttft": {"mean": 0.001}}
    return {
        "index": index,
        "load": 2**index,
        "summary": other,
        "by_tier": {tier: llm, "faq": other},
    }


def _write_run(tmp_path: Path, prefill: float, decode: float, tier: str = "llm") -> Path:
    """A run as the model predicts it with prefills ``prefill`` and steps ``decode`` times
    slower than the default estimate."""
    speed = _speed().with_efficiency(Efficiency(decode_scale=decode, prefill_scale=prefill))
    levels = []
    records = []
    for index, rate in enumerate((0.1, 0.25, 0.4)):
        real = load_at_rate(speed, 300, 60, rate)
        assert real is not None
        levels.append(_level(index, rate, real.ttft_s, real.tpot_s, tier))
        records += [
            {
                "level": index,
                "status": "ok",
                "tier": tier,
                "prompt_tokens": 340,
                "cached_prompt_tokens": 40,
            },
            {"level": index, "status": "ok", "tier": "faq", "prompt_tokens": None},
        ]
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"format": "kefu-bench/1", "label": "t", "levels": levels}))
    (tmp_path / "requests.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    return summary


def test_the_fitted_scales_recover_how_much_slower_the_device_is(tmp_path: Path) -> None:
    summary = _write_run(tmp_path, prefill=3.0, decode=2.0)
    calibration = calibrate(summary, _speed(), default_tokens_in=512)
    assert calibration.tokens_in_from == "requests.jsonl"
    assert calibration.decode_scale == pytest.approx(2.0, rel=0.03)
    assert calibration.prefill_scale == pytest.approx(3.0, rel=0.03)
    for row in calibration.rows:
        assert row.observed.tokens_in == 300  # 340 prompt tokens, 40 from the prefix cache
        assert row.observed.tokens_out == 60
        assert row.raw is not None
        assert row.raw.ttft_s < row.observed.ttft_s / 2
        assert row.calibrated.ttft_s == pytest.approx(row.observed.ttft_s, rel=0.05)
        assert row.calibrated.tpot_s == pytest.approx(row.observed.tpot_s, rel=0.05)


def test_a_plain_openai_servers_run_counts_every_answer(tmp_path: Path) -> None:
    summary = _write_run(tmp_path, prefill=1.0, decode=1.0, tier="unknown")
    data = json.loads(summary.read_text())
    for level in data["levels"]:
        level["summary"] = level["by_tier"]["unknown"]
        level["by_tier"] = {"unknown": level["summary"]}
    summary.write_text(json.dumps(data))
    (tmp_path / "requests.jsonl").unlink()
    calibration = calibrate(summary, _speed(), default_tokens_in=300)
    assert calibration.tokens_in_from == "--tokens-in 300"
    assert calibration.decode_scale == pytest.approx(1.0, rel=0.03)
    assert calibration.prefill_scale == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("nope", "not JSON"),
        (json.dumps({"format": "other"}), "not a kefu bench summary"),
        (json.dumps({"format": "kefu-bench/1", "levels": []}), "no level with timed LLM"),
    ],
)
def test_unusable_bench_files_are_plan_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "summary.json"
    path.write_text(content)
    with pytest.raises(PlanError, match=message):
        calibrate(path, _speed(), default_tokens_in=512)
    with pytest.raises(PlanError, match="cannot read"):
        calibrate(tmp_path / "absent.json", _speed(), default_tokens_in=512)


def test_a_users_run_is_modelled_as_a_closed_loop_with_its_think_time(tmp_path: Path) -> None:
    real = _speed().with_efficiency(Efficiency(decode_scale=4.0, prefill_scale=2.0))
    levels = []
    for index, users in enumerate((1, 2, 4)):
        loop = Traffic(tokens_in=300, tokens_out=60, concurrent_chats=users, think_s=2.0)
        seen = load_at(real, loop, users)
        assert seen is not None
        levels.append(_level(index, seen.turns_per_s, seen.ttft_s, seen.tpot_s, "llm"))
        levels[-1]["load"] = users
        levels[-1]["summary"]["requests"] = levels[-1]["by_tier"]["llm"]["requests"] = 20
    summary = tmp_path / "summary.json"
    run = {"mode": "users"}
    workload = {"think": "2 s (exponential mean)"}
    summary.write_text(
        json.dumps({"format": "kefu-bench/1", "run": run, "workload": workload, "levels": levels})
    )
    calibration = calibrate(summary, _speed(), default_tokens_in=300)
    assert [row.observed.chats for row in calibration.rows] == [1, 2, 4]
    assert calibration.decode_scale == pytest.approx(4.0, rel=0.03)
    assert calibration.prefill_scale == pytest.approx(2.0, rel=0.03)
