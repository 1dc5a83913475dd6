"""``kefu plan`` end to end in process: the report, --json, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kefu import cli

# Given CPU figures keep these tests from measuring the machine.
CPU = ["--cpu-bandwidth", "20", "--cpu-tflops", "0.1"]
WORKED = [
    "plan",
    "--model",
    "Qwen2.5-7B-Instruct",
    "--concurrent-chats",
    "40",
    "--tokens-in",
    "512",
    "--tokens-out",
    "150",
    "--slo",
    "ttft=1s",
    *CPU,
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_the_worked_example_names_the_cheapest_card_and_the_cpu_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = _run(WORKED, capsys)
    assert status == 0, err
    assert "roofline estimates, not measurements" in out
    assert "57,344 B a token" in out
    assert "/ (1 - 0.3 headroom) = 57.1 chats planned" in out
    assert "cheapest that meets the SLO: " in out
    assert "CPU only   no: one turn alone" in out
    for card in ("RTX 4090", "A10", "L20", "L40S", "A100 40GB", "A100 80GB", "H100", "H200"):
        assert f"\n{card} " in out


def test_json_has_every_card_and_the_cheapest(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run([*WORKED, "--json", "--rent", "RTX 4090=10000"], capsys)
    assert status == 0
    plan = json.loads(out)
    assert plan["estimate"] == "roofline"
    assert plan["model"]["kv_bytes_per_token"] == 57_344
    assert len(plan["cards"]) == 8
    assert plan["cheapest"]["device"] != "RTX 4090"  # its rent was raised out of reach
    assert plan["cpu"]["meets"] is False


def test_daily_volume_gives_turns_a_second_at_peak(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "Qwen3-8B", "--daily-conversations", "86400", "--turns", "1"]
    status, out, _ = _run([*argv, "--burst", "5", "--cards", "L40S,h100", "--json", *CPU], capsys)
    assert status == 0
    plan = json.loads(out)
    # 86 400 turns a day = 1 a second on average; x 5 burst; / 0.7 headroom
    assert plan["traffic"]["peak_turns_per_s"] == pytest.approx(5.0)
    assert plan["traffic"]["planned_demand"] == pytest.approx(5 / 0.7)
    assert [c["device"] for c in plan["cards"]] == ["L40S", "H100"]


def test_an_slo_no_card_meets_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run([*WORKED, "--slo", "ttft=1ms"], capsys)
    assert status == 1
    assert "no card meets this" in out
    assert "one turn alone: TTFT" in out
    assert err == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--concurrent-chats", "0"], "--concurrent-chats must be > 0, not 0"),
        (["--concurrent-chats", "-3"], "--concurrent-chats must be > 0, not -3"),
        (["--tokens-out", "0"], "--tokens-out must be > 0"),
        (["--headroom", "1"], "--headroom must be in [0, 1)"),
        (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization must be in (0, 1]"),
        (["--slo", "ttft=-1s"], "--slo"),
        (["--model", "gpt-5"], "no model 'gpt-5'"),
        (["--precision", "int3"], "unknown precision"),
        (["--cards", "V100"], "unknown card 'V100'"),
        (["--rent", "L20"], "expected NAME=USD"),
        (["--cpu-bandwidth", "0"], "--cpu-bandwidth must be > 0"),
    ],
)
def test_bad_input_is_one_line_on_stderr(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    status, out, err = _run([*WORKED, *extra], capsys)
    assert status == 2
    assert out == ""
    assert err.startswith("kefu plan: error: ")
    assert message in err
    assert err.count("\n") == 1  # one line, no traceback


def test_traffic_is_required_and_daily_volume_must_be_positive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = _run(["plan", "--model", "Qwen3-8B", *CPU], capsys)
    assert (status, err.count("\n")) == (2, 1)
    assert "give one of --daily-conversations or --concurrent-chats" in err
    status, _, err = _run(["plan", "--model", "Qwen3-8B", "--daily-conversations", "-5"], capsys)
    assert "--daily-conversations must be > 0, not -5" in err


def test_files_that_are_not_models_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hidden_size": 4096}))
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"GGUF but nothing after the magic")
    for model, message in (
        (config, "missing num_hidden_layers"),
        (not_gguf, "not a GGUF model file"),
        (tmp_path / "absent.json", "cannot read"),
    ):
        status, _, err = _run(["plan", "--model", str(model), "--concurrent-chats", "4"], capsys)
        assert status == 2
        assert message in err
        assert err.count("\n") == 1


def test_a_config_json_is_planned_like_the_built_in_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kefu.plan.catalog import CONFIGS

    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIGS["Qwen/Qwen2.5-7B-Instruct"]))
    status, out, _ = _run([*WORKED, "--model", str(config), "--json"], capsys)
    _, builtin, _ = _run([*WORKED, "--json"], capsys)
    assert status == 0
    assert json.loads(out)["cards"] == json.loads(builtin)["cards"]


def test_list_shows_models_cards_and_precisions(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(["plan", "--list"], capsys)
    assert status == 0
    for listed in ("Qwen/Qwen2.5-72B-Instruct", "H200", "q4_k"):
        assert listed in out
