"""``kefu diagnose`` against a real ``kefu serve --engine fake`` subprocess.

Nothing here asserts on absolute speed: the saturated server has one slot and
slow fake tokens, so waiting for the slot dominates on any machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.support import KefuServer, free_port, running_kefu

CONCURRENT = 24


@pytest.fixture(scope="module")
def light_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KefuServer]:
    """Plenty of slots; tokens a few ms apart, so decode, not the gateway, fills E2E."""
    base = tmp_path_factory.mktemp("light")
    with running_kefu(base, "--engine", "fake", "--fake-token-delay", "0.005") as server:
        yield server


@pytest.fixture(scope="module")
def saturated_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KefuServer]:
    """One slot, ~0.2 s per reply: concurrent requests wait in the admission queue (the
    queue policy: by predicted wait, those past --ttft-slo would be refused instead)."""
    with running_kefu(
        tmp_path_factory.mktemp("saturated"),
        "--engine",
        "fake",
        "--admission",
        "queue",
        "--parallel",
        "1",
        "--max-queue",
        "64",
        "--fake-token-delay",
        "0.02",
        "--fake-reply-words",
        "10",
    ) as server:
        yield server


def kefu_diagnose(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEFU_")}
    return subprocess.run(
        [sys.executable, "-m", "kefu", "diagnose", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        check=False,
    )


async def concurrent_chats(url: str, count: int) -> list[int]:
    async def one(client: httpx.AsyncClient, i: int) -> int:
        response = await client.post("/chat", json={"message": f"question {i}"})
        return response.status_code

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        return await asyncio.gather(*(one(client, i) for i in range(count)))


def explain(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def test_light_load_is_healthy(light_server: KefuServer) -> None:
    result = kefu_diagnose("--url", light_server.url)  # the default probe fills the window
    assert result.returncode == 0, explain(result)
    assert "HEALTHY" in result.stdout, explain(result)
    assert "UNHEALTHY" not in result.stdout
    for check in ("stages", "ttft", "queue", "timeouts"):
        assert check in result.stdout, explain(result)


def test_json_verdict(light_server: KefuServer) -> None:
    result = kefu_diagnose("--url", light_server.url, "--json")
    assert result.returncode == 0, explain(result)
    verdict = json.loads(result.stdout)  # stdout is the JSON alone; progress goes to stderr
    assert verdict["status"] == "healthy"
    assert verdict["samples"] >= 12
    assert {f["check"] for f in verdict["findings"]} >= {"ttft", "queue", "timeouts"}


def test_too_few_samples_without_a_probe_cannot_judge(light_server: KefuServer) -> None:
    result = kefu_diagnose("--url", light_server.url, "--no-probe", "--min-samples", "100000")
    assert result.returncode == 2, explain(result)
    assert "nothing to judge" in result.stderr
    assert result.stdout == ""


def test_saturated_server_names_the_queue(saturated_server: KefuServer) -> None:
    statuses = asyncio.run(concurrent_chats(saturated_server.url, CONCURRENT))
    assert statuses == [200] * CONCURRENT
    result = kefu_diagnose("--url", saturated_server.url, "--no-probe", "--min-samples", "10")
    assert result.returncode == 1, explain(result)
    assert "UNHEALTHY" in result.stdout
    assert "queue is the bottleneck" in result.stdout, explain(result)
    (queue_line,) = [line for line in result.stdout.splitlines() if line.split()[1:2] == ["queue"]]
    assert queue_line.split()[0] == "FAIL", queue_line


def test_unreachable_url_cannot_measure() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = kefu_diagnose("--url", url, "--no-probe")
    assert result.returncode == 2, explain(result)
    assert "cannot read" in result.stderr
    assert result.stdout == ""
