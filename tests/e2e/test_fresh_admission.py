"""A fresh server on the real model admits what it can serve, and ``kefu diagnose`` does not
blame capacity for it (issue 36: a fresh server refused 31 of 32 requests it then served
inside the SLO, and diagnose told the operator to add engines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import httpx
import pytest

from tests.e2e.support import KefuServer, Stopped

pytestmark = pytest.mark.e2e


def test_a_fresh_server_is_not_diagnosed_short_of_capacity(
    kefu_server: KefuServer, restart_server: Callable[[], Stopped]
) -> None:
    restart_server()
    admission = httpx.get(kefu_server.url + "/ready", timeout=30).json()["admission"]
    # Nothing measured yet but the warm read at start: a sample of the line, no outcome.
    assert admission["predictions"]["outcomes"] == 0
    assert admission["prompt_reading"]["samples"] == 1
    assert admission["prompt_reading"]["per_token_ms"] > 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEFU_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kefu",
            "diagnose",
            "--url",
            kefu_server.url,
            "--json",
            "--min-samples",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    checks = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
    # Four probe customers never fill eight slots: a refusal, if any, came with a slot
    # free, and is admission's to answer for, or the reading's (prompts still to be read
    # ahead of it, predictions that held), never capacity's.
    assert "capacity" not in checks, checks
    refusals = httpx.get(kefu_server.url + "/ready", timeout=30).json()["admission"]["refusals"]
    assert refusals["total"] == refusals["with_free_slot"]
    if "reading" in checks:
        assert refusals["with_room"] * 2 < refusals["total"], (checks, refusals)
