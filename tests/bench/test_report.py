"""Console tables, JSON and JSONL, plots, the HTML report, progress and compare, on
synthetic results (no server)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from kefu.bench.client import Target
from kefu.bench.compare import better, compare_text, ratio
from kefu.bench.html import REPORT_FILE, write_html
from kefu.bench.load import LevelPlan, LevelState
from kefu.bench.plots import PNGS, write_plots
from kefu.bench.progress import ProgressBar
from kefu.bench.record import RequestRecord
from kefu.bench.report import (
    REQUESTS_FILE,
    SUMMARY_FILE,
    console_report,
    summary_json,
    write_results,
)
from kefu.bench.runner import BenchConfig, BenchResult, LevelResult, analyse, knee_of
from kefu.bench.slo import Slo
from kefu.bench.workload import WorkloadSpec, builtin_pool
from tests.bench.conftest import record

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def level(index: int, users: float, e2e: float, *, fail_all: bool = False) -> LevelResult:
    plan = LevelPlan(index, "users", users, requests=20, duration=60, timeout=10)
    records = []
    for i in range(20):
        turn = 1 + i % 3
        tier = "llm" if i % 4 else "faq-cache"
        first = 0.02 * turn if tier == "llm" else 0.005
        r = record(
            sent=i,
            first=i + first,
            chunks=[i + first, i + e2e / 2],
            end=i + e2e,
            tokens=12,
            tier=tier,
            turn=turn,
            level=index,
            load=users,
        )
        if fail_all:
            r.status, r.error, r.first_content, r.chunks = "error", "HTTP 503", None, []
        records.append(r)
    return analyse(plan, records, Slo(ttft=0.5))


def result(levels: list[LevelResult], sweep: bool = True) -> BenchResult:
    config = BenchConfig(
        target=Target("http://127.0.0.1:8000"),
        workload=WorkloadSpec(pool=builtin_pool("en")),
        mode="users",
        levels=tuple(lv.plan.load for lv in levels),
        sweep=sweep,
        requests=20,
        duration=60,
        timeout=10,
        slo=Slo(ttft=0.5),
    )
    knee = knee_of(levels) if sweep else None
    return BenchResult(config, config.target, levels, knee, 1_700_000_000.0, 12.5)


def sweep() -> BenchResult:
    return result([level(0, 1, 0.3), level(1, 2, 0.31), level(2, 4, 0.7), level(3, 8, 1.4)])


def test_console_report() -> None:
    text = console_report(sweep())
    for heading in ("throughput", "latency (ms", "by answer tier", "by turn number"):
        assert f"\n{heading}" in text
    assert "http://127.0.0.1:8000/chat" in text
    assert "pass <- knee" in text
    assert (
        "knee: 2 users; the next level fails: load 4 raises E2E p50 2.26x over 2 (limit 1.5x)"
        in text
    )
    assert "faq-cache" in text
    lines = text.splitlines()
    assert any(line.startswith("4      3 ") for line in lines)  # level 4, turn 3


def test_summary_json_is_strict_json(tmp_path: Path) -> None:
    failed = result([level(0, 1, 0.3), level(1, 2, 0.3, fail_all=True)])
    data = summary_json(failed)
    text = json.dumps(data, allow_nan=False)  # no NaN or Infinity anywhere
    assert data["levels"][1]["summary"]["ttft"]["p50"] is None
    assert data["levels"][1]["summary"]["slo_p99"]["ttft"] is None  # infinite
    assert data["knee"]["status"] == "found"
    assert data["knee"]["load"] == 1.0
    assert "by_turn" in data["levels"][0]
    assert set(data["levels"][0]["by_tier"]) == {"faq-cache", "llm"}
    assert data["definitions"]["ttft"].startswith("first non-empty content")
    assert "Infinity" not in text


def test_write_results_and_records_round_trip(tmp_path: Path) -> None:
    run = sweep()
    summary, requests = write_results(run, tmp_path / "out")
    assert summary.name == SUMMARY_FILE
    assert requests.name == REQUESTS_FILE
    lines = requests.read_text().splitlines()
    assert len(lines) == 80
    first = RequestRecord.from_json(json.loads(lines[0]))
    assert first == run.levels[0].records[0]


def test_plots_and_html(tmp_path: Path) -> None:
    run = result([level(0, 1, 0.3), level(1, 2, 0.3, fail_all=True), level(2, 4, 0.4)])
    images = write_plots(run, tmp_path)
    assert [p.name for p in images] == list(PNGS)
    for image in images:
        assert image.read_bytes().startswith(PNG_MAGIC)
    page = write_html(run, tmp_path, images)
    assert page.name == REPORT_FILE
    html = page.read_text()
    for name in PNGS:
        assert f'<img src="{name}"' in html
    assert "<table>" in html
    assert "knee" in html


def test_plots_of_a_single_level_and_no_success(tmp_path: Path) -> None:
    for run in (result([level(0, 4, 0.3)], sweep=False), result([level(0, 1, 0.3, fail_all=True)])):
        for image in write_plots(run, tmp_path):
            assert image.read_bytes().startswith(PNG_MAGIC)


def test_progress_bar() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, live=True)
    plan = LevelPlan(0, "users", 4, requests=10, duration=60, timeout=5)
    state = LevelState(plan, started=0.0, sent=5, in_flight=3)
    bar.level_started(plan)
    bar.tick(state, now=2.0)
    assert "\r" in stream.getvalue()
    assert (
        "[############............] 5/10 sent, 3 in flight, 0 failed, 2/60 s" in stream.getvalue()
    )
    bar.level_done(level(0, 4, 0.3))
    assert stream.getvalue().endswith("SLO met\n")
    quiet = io.StringIO()
    bar = ProgressBar(quiet, live=False)
    bar.tick(state, now=2.0)
    assert quiet.getvalue() == ""
    bar.level_done(level(0, 1, 0.3))
    assert quiet.getvalue().startswith("          1 user: 20 requests, 0 failed")


def test_compare_text() -> None:
    a = summary_json(sweep())
    b = json.loads(json.dumps(a))
    b["label"] = "faster"
    b["levels"][1]["summary"]["ttft"]["p50"] /= 2
    b["levels"][1]["summary"]["request_throughput"] *= 3
    del b["levels"][3]
    b["knee"] = {"status": "not_reached", "load": 4.0}
    text = compare_text(a, b, "a.json", "b.json")
    assert "A: kefu" not in text  # labels are the runs' own
    assert "B: faster  (b.json)" in text
    lines = text.splitlines()
    ttft = next(line for line in lines if line.startswith("2 ") and "TTFT p50" in line)
    assert ttft.split()[-2:] == ["0.50x", "B"]
    rps = next(line for line in lines if line.startswith("2 ") and "req/s" in line)
    assert rps.split()[-2:] == ["3.00x", "B"]
    same = next(line for line in lines if line.startswith("1 ") and "E2E p50" in line)
    assert same.split()[-2:] == ["1.00x", "="]
    missing = next(line for line in lines if line.startswith("8 ") and "E2E p50" in line)
    assert missing.split()[-3:] == ["-", "-", "-"]
    assert "knee (users): A 2, B >= 4" in text


def test_ratio_and_better() -> None:
    assert ratio(2.0, 3.0) == "1.50x"
    assert ratio(0.0, 3.0) == "-"
    assert ratio(None, 3.0) == "-"
    assert ratio(math.nan, 3.0) == "-"
    assert better(1.0, 2.0, higher_is_better=True) == "B"
    assert better(1.0, 2.0, higher_is_better=False) == "A"
    assert better(1.0, 1.01, higher_is_better=False) == "="
