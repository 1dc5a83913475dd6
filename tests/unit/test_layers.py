"""kefu's packages are layered: a lower one never imports a higher one.

The contracts are ``.importlinter``'s (``text`` lowest, importing nothing else of kefu;
``knowledge`` below ``cache``, ``faq`` and ``fastpath``, which do not import each other;
``service`` below ``channels`` and ``api``); scripts/check runs ``lint-imports`` on them,
and this test runs them too, because CI runs only the tests. And one module normalises
Unicode: ``text/normalize.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kefu

SRC = Path(kefu.__file__).parent
ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_hold() -> None:
    # A process of its own: import-linter configures the logging of the process it runs in.
    lint = Path(sys.executable).with_name("lint-imports")
    config = str(ROOT / ".importlinter")
    done = subprocess.run(
        [lint, "--config", config, "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_one_module_normalises_unicode() -> None:
    callers = sorted(
        str(path.relative_to(SRC))
        for package in ("text", "knowledge", "cache", "fastpath", "service", "faq")
        for path in (SRC / package).rglob("*.py")
        if "unicodedata.normalize" in path.read_text(encoding="utf-8")
    )
    assert callers == ["text/normalize.py"]
