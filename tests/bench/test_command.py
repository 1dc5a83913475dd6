"""The ``kefu bench`` command: help on every flag, one-line errors, exit codes, lazy imports."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from kefu import cli
from tests.e2e.support import free_port


@pytest.fixture(autouse=True)
def wide_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


def bench_parser() -> argparse.ArgumentParser:
    commands = next(
        a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    parser: argparse.ArgumentParser = commands.choices["bench"]
    return parser


def test_every_flag_has_help() -> None:
    for action in bench_parser()._actions:
        if action.option_strings:
            assert action.help, action.option_strings


def test_help_explains_compare(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "kefu bench compare A.json B.json" in out
    assert "--sweep" in out
    assert "knee" in out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "bench" in capsys.readouterr().out


def error_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(["bench", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err  # one line, no traceback
    assert lines[0].startswith("kefu bench: error: ")
    return lines[0]


URL = "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ((), "--url is required"),
        (("--url", "localhost:8000"), "expected http://HOST[:PORT]"),
        (("--url", URL, "--slo", "ttft=soon"), "--slo 'ttft=soon': ttft: 'soon' is not a duration"),
        (("--url", URL, "--turns", "0"), "--turns '0'"),
        (("--url", URL, "--think", "x"), "--think 'x'"),
        (("--url", URL, "--users", "0"), "--users must be between 1 and 1024"),
        (("--url", URL, "--rate", "0"), "--rate must be above 0"),
        (("--url", URL, "--sweep", "1,x"), "--sweep '1,x'"),
        (("--url", URL, "--sweep", "1.5,3"), "whole numbers"),
        (("--url", URL, "--requests", "0"), "--requests must be between"),
        (("--url", URL, "--duration", "0"), "--duration must be above 0"),
        (("--url", URL, "--repeat-share", "0.9", "--order-share", "0.2"), "at most 1"),
        (("--url", URL, "--knee-growth", "1"), "--knee-growth must be above 1"),
        (("--url", URL, "--pool", "/nonexistent/pool.jsonl"), "cannot read pool"),
    ],
)
def test_bad_arguments(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], says: str
) -> None:
    assert says in error_of(capsys, *argv)


def test_malformed_pool_names_the_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pool = tmp_path / "pool.jsonl"
    pool.write_text('{"text": "Hi?"}\n{"text": "Where is {order}", "kind": "order"\n')
    line = error_of(capsys, "--url", URL, "--pool", str(pool))
    assert f"{pool} line 2: not valid JSON" in line


def test_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    line = error_of(capsys, "--url", url, "--no-progress")
    assert f"cannot reach {url}: connection failed" in line


def test_compare_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"some": "json"}')
    assert "is not a kefu bench summary" in error_of(capsys, "compare", str(other), str(other))
    missing = str(tmp_path / "missing.json")
    assert "cannot read" in error_of(capsys, "compare", missing, str(other))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert "is not JSON" in error_of(capsys, "compare", str(broken), str(other))


def test_kefu_help_imports_no_heavy_bench_module() -> None:
    code = (
        "import sys\n"
        "from kefu import cli\n"
        "cli.build_parser()\n"
        "heavy = ['matplotlib', 'kefu.bench.client', 'kefu.bench.metrics', 'kefu.bench.plots']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "[]"
