"""Bad input by hand, over raw sockets, to a real ``kefu serve`` (fake engine: the HTTP layer
is under test): each probe gets a clear 4xx in the OpenAI envelope (or, for the two kefu
serves by design, a 200) within a bounded time, the server stays up, and nothing is stored."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.bad_input import (
    Probe,
    envelope_code,
    exchange,
    probes,
    stored_counts,
)
from tests.e2e.support import KefuServer, running_kefu

pytestmark = pytest.mark.e2e

BODY_TIMEOUT_S = 1.0
# Generous for 2 shared cores; the slow-loris probe takes BODY_TIMEOUT_S by design.
BOUND_S = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KefuServer]:
    base = tmp_path_factory.mktemp("kefu-bad-input")
    with running_kefu(
        base, "--engine", "fake", "--body-timeout", str(BODY_TIMEOUT_S), "--no-second-look"
    ) as server:
        yield server


@pytest.mark.parametrize("probe", probes(BODY_TIMEOUT_S), ids=lambda p: p.name)
def test_each_probe_gets_its_answer(server: KefuServer, probe: Probe) -> None:
    before = stored_counts(server.data_dir)
    answer = exchange("127.0.0.1", server.port, probe)
    assert answer.statuses == list(probe.expect), answer.body[:300]
    assert answer.seconds < BOUND_S
    if probe.expect[-1] >= 400:
        code = envelope_code(answer.body)
        if probe.code is not None:
            assert code == probe.code
    # Refused before any turn ran: nothing stored, and the server still answers.
    assert stored_counts(server.data_dir) == before
    assert httpx.get(server.url + "/health", timeout=5).status_code == 200


def test_the_slow_loris_is_cut_at_the_body_timeout(server: KefuServer) -> None:
    slow = next(p for p in probes(BODY_TIMEOUT_S) if p.name.startswith("slow-loris"))
    answer = exchange("127.0.0.1", server.port, slow)
    assert answer.statuses == [408]
    assert BODY_TIMEOUT_S * 0.9 <= answer.seconds < BODY_TIMEOUT_S + 3


def test_a_good_turn_after_the_bad_ones_is_stored_whole(server: KefuServer) -> None:
    with httpx.stream(
        "POST", server.url + "/chat", json={"message": "hello there"}, timeout=30
    ) as response:
        assert response.status_code == 200
        text = "".join(response.iter_text())
    assert "event: done" in text
    # Write-behind: the turn lands just after the stream ends.
    deadline = time.monotonic() + 5
    while stored_counts(server.data_dir) != (1, 2):
        assert time.monotonic() < deadline, stored_counts(server.data_dir)
        time.sleep(0.05)
