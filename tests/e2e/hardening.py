"""Run a benchmarks/ hardening script (storm, crash loop, soak) as a subprocess and read the
counts it writes with --json: the tests assert what the scripts measure, lean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(name: str, *args: str, out: Path, timeout: float) -> tuple[Any, str]:
    """The script's --json counts and its printed table (shown when an assertion fails)."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args, "--json", str(out)],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text()), result.stdout
