"""Against a real ``kefu serve --engine fake`` subprocess whose capacity is known.

The server has 4 slots and each reply takes 8 words x 50 ms = 400 ms, so up to 4 users
are served at once and 8 users queue: E2E p50 doubles from 4 to 8 users. The sweep must
put the knee at 4. Nothing here asserts on absolute speed.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from kefu import cli
from kefu.bench.plots import PNGS
from kefu.bench.record import RequestRecord
from tests.bench.conftest import PARALLEL, REPLY_WORDS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUESTS = 24  # per level: at 1 user 24 x 0.4 s = 10 s, the longest level


@pytest.fixture(scope="module")
def sweep_run(fake_server: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The sweep, run once for the tests below: its --out folder and its console output."""
    out = tmp_path_factory.mktemp("sweep")
    argv = ["bench", "--url", fake_server, "--sweep", "1,2,4,8,16"]
    argv += ["--requests", str(REQUESTS), "--think", "0", "--turns", "1-3"]
    argv += ["--slo", "ttft=5s", "--no-progress", "--out", str(out), "--label", "fake"]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = cli.main(argv)
    assert status == 0
    return out, stdout.getvalue()


def test_sweep_finds_the_knee_at_capacity(sweep_run: tuple[Path, str]) -> None:
    out, console = sweep_run
    summary = json.loads((out / "summary.json").read_text())
    knee = summary["knee"]
    assert knee["status"] == "found", knee
    assert knee["load"] == PARALLEL, console
    assert f"knee: {PARALLEL} users; the next level fails: load {2 * PARALLEL} raises" in console
    levels = {lv["load"]: lv for lv in summary["levels"]}
    assert list(levels) == [1, 2, 4, 8, 16]
    for lv in levels.values():
        assert lv["summary"]["requests"] == REQUESTS
        assert lv["summary"]["errors"] == 0
        assert lv["by_tier"].keys() == {"llm"}  # from kefu's done events
        assert set(lv["by_turn"]) <= {"1", "2", "3"}
    # Below capacity throughput grows with the users; past it, it cannot.
    rps = {load: lv["summary"]["request_throughput"] for load, lv in levels.items()}
    assert rps[2] > 1.5 * rps[1]
    assert rps[16] < 1.5 * rps[4]


def test_out_writes_json_jsonl_pngs_and_html(sweep_run: tuple[Path, str]) -> None:
    out, console = sweep_run
    lines = (out / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 5 * REQUESTS
    records = [RequestRecord.from_json(json.loads(line)) for line in lines]
    assert all(r.ok and r.tier == "llm" and r.completion_tokens == REPLY_WORDS for r in records)
    assert all(r.first_content is not None and r.sent < r.first_content <= r.end for r in records)
    for name in PNGS:
        assert (out / name).read_bytes().startswith(PNG_MAGIC), name
    html = (out / "report.html").read_text()
    for name in PNGS:
        assert f'src="{name}"' in html
    assert "wrote: " in console


def test_compare_prints_ratios(
    sweep_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = sweep_run
    data = json.loads((out / "summary.json").read_text())
    data["label"] = "twice as slow"
    for level in data["levels"]:
        level["summary"]["e2e"]["p50"] *= 2
    other = tmp_path / "b.json"
    other.write_text(json.dumps(data))
    assert cli.main(["bench", "compare", str(out / "summary.json"), str(other)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("4 ") and "E2E p50" in line)
    assert row.split()[-2:] == ["2.00x", "A"]
    assert "knee (users): A 4, B 4" in text


def test_rate_mode_and_the_openai_api(fake_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--url", fake_server, "--rate", "20", "--requests", "12", "--think", "0"]
    assert cli.main([*argv, "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "sessions/s" in text
    assert "knee" not in text
    argv = ["bench", "--url", fake_server + "/v1", "--api", "openai", "--users", "2"]
    argv += ["--requests", "6", "--think", "0", "--turns", "2", "--no-progress"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "/v1/chat/completions (openai, model fake-engine)" in text
    tier_row = next(line for line in text.splitlines() if line.startswith("2      unknown"))
    assert tier_row.split()[2] == "6"  # 6 requests, no tier on /v1
