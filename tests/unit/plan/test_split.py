"""``kefu plan --split``: several small models, one per model group, against one big one
(seed 003: three 1B models where one 7B stood)."""

from __future__ import annotations

import json

import pytest

from kefu import cli
from kefu.plan import PlanError
from kefu.plan.split import parse_split, share_of
from kefu.plan.traffic import Traffic

CPU = ["--cpu-bandwidth", "20", "--cpu-tflops", "0.1"]
SEED = [
    "plan",
    *("--model", "Qwen2.5-7B-Instruct", "--precision", "int4"),
    *("--daily-conversations", "20000"),
    *("--split", "Llama-3.2-1B-Instruct=0.4"),
    *("--split", "Llama-3.2-1B-Instruct=0.3"),
    *("--split", "Llama-3.2-1B-Instruct=0.3"),
    *CPU,
]


def test_shares_are_pairs_that_add_up_to_one() -> None:
    assert parse_split(["a=0.5", "b/c=0.5"]) == [("a", 0.5), ("b/c", 0.5)]
    assert parse_split([]) == []
    for bad, says in (
        (["a"], "expected MODEL=SHARE"),
        (["a=x"], "expected MODEL=SHARE"),
        (["a=0"], "expected MODEL=SHARE"),
        (["a=0.5", "b=0.4"], "add up to 0.9"),
    ):
        with pytest.raises(PlanError, match=says):
            parse_split(bad)


def test_a_share_of_the_traffic_is_a_share_of_its_volume() -> None:
    daily = Traffic(512, 150, daily_conversations=20000)
    assert share_of(daily, 0.25).planned_demand() == pytest.approx(daily.planned_demand() / 4)
    chats = Traffic(512, 150, concurrent_chats=40)
    assert share_of(chats, 0.5).concurrent_chats == 20


def test_the_seeds_split_against_one_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(SEED) == 0
    out = capsys.readouterr().out
    assert "weights 2.88 GiB in all against 5.19 GiB" in out
    assert "\nRTX 4090 " in out
    assert "cheapest split: 1 x RTX 4090 packed" in out
    assert cli.main([*SEED, "--json"]) == 0
    split = json.loads(capsys.readouterr().out)["split"]
    assert [p["share"] for p in split["parts"]] == [0.4, 0.3, 0.3]
    rows = {row["device"]: row for row in split["devices"]}
    h100 = rows["H100"]
    # Each group on cards of its own needs one each; packed, they share one.
    assert (h100["one_cards"], h100["separate_cards"], h100["packed_cards"]) == (1, 3, 1)
    assert h100["cards_by_part"] == [1, 1, 1]
    # Time-shared, a card carries more of the split than of the one model (5.4x fewer
    # weight bytes to read per step).
    assert h100["packed_carries"] > h100["one_carries"]
    assert rows["CPU (2 threads)"]["separate_cards"] is None


def test_a_split_model_that_is_unknown_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "--model", "Qwen2.5-7B-Instruct", "--concurrent-chats", "8", *CPU]
    assert cli.main([*argv, "--split", "no-such-model=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kefu plan: error: ")
    assert len(err.splitlines()) == 1
