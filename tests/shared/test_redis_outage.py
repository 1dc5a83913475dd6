"""Redis killed under load and started again: kefu answers 503 fast while it is gone, loses
no turn that got ``done``, and its limits resume by themselves."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.support import KefuServer, sse_frames
from tests.shared.support import running_redis
from tests.shared.test_replicas import create_key

REQUEST_TIMEOUT = 10.0


def one_turn(url: str, key: str, message: str, session_id: str | None) -> tuple[str, Any]:
    """('done', session id) | ('503', None) | (other outcome, detail); timed."""
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    try:
        with httpx.stream(
            "POST", url + "/chat", json=body, headers={"x-api-key": key}, timeout=REQUEST_TIMEOUT
        ) as response:
            if response.status_code != 200:
                response.read()
                if response.status_code == 503 and "retry-after" in response.headers:
                    return "503", None
                return f"status {response.status_code}", response.text
            frames = list(sse_frames(response.iter_bytes()))
    except httpx.TimeoutException:
        return "hung", None
    last = frames[-1]
    if last.event == "done":
        return "done", last.json()["session_id"]
    if last.event == "error" and last.json()["error"]["code"] == "state_unavailable":
        return "503", None  # the turn could not be stored: an error event, never `done`
    return f"event {last.event}", last.data


def test_redis_killed_under_load(tmp_path: Path) -> None:
    with running_redis(tmp_path / "redis", durable=True) as redis:
        key = create_key(redis.url, "--name", "load", "--rate-limit", "100000/60")
        server = KefuServer(
            tmp_path / "data",
            tmp_path / "kefu.log",
            [
                "--engine", "fake",
                "--no-fast-path",
                "--no-warmup",
                "--redis", redis.url,
                "--auth", "keys",
                "--max-streams", "0",
            ],
        )  # fmt: skip
        server.data_dir.mkdir()
        server.start()
        answered: list[tuple[str, str]] = []
        lost: list[tuple[str, str, int, list[str]]] = []  # (session id, message) that got `done`
        outcomes: Counter[str] = Counter()
        slowest = [0.0]
        limited_after = Counter[bool]()
        stop = threading.Event()
        recovered = threading.Event()
        lock = threading.Lock()

        def customer(worker: int) -> None:
            session_id: str | None = None
            turn = 0
            while not stop.is_set():
                turn += 1
                message = f"customer {worker} message {turn}"
                started = time.monotonic()
                outcome, detail = one_turn(server.url, key, message, session_id)
                with lock:
                    slowest[0] = max(slowest[0], time.monotonic() - started)
                    outcomes[outcome] += 1
                    if outcome == "done":
                        session_id = detail
                        answered.append((detail, message))
                if outcome == "503":
                    time.sleep(0.05)
                elif outcome.startswith("status 404"):
                    session_id = None  # its first turn was never stored: start again

        try:
            workers = [threading.Thread(target=customer, args=(i,)) for i in range(6)]
            for worker in workers:
                worker.start()
            time.sleep(1.0)
            redis.kill()
            time.sleep(1.5)
            redis.start()  # the same data: every write it acknowledged is on disk
            deadline = time.monotonic() + 10
            while True:  # recovery needs no restart of kefu
                probe = httpx.post(
                    server.url + "/v1/chat/completions",
                    json={"model": "x", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"x-api-key": key},
                )
                if "x-ratelimit-limit" in probe.headers:
                    limited_after[True] += 1
                    break
                assert time.monotonic() < deadline, "limits did not come back"
                time.sleep(0.1)
            recovered.set()
            time.sleep(1.0)
            stop.set()
            for worker in workers:
                worker.join(REQUEST_TIMEOUT * 2)
            for session_id, message in answered:
                for _ in range(5):  # a 503 here is a read that failed, not a lost turn
                    history = httpx.get(
                        f"{server.url}/sessions/{session_id}", headers={"x-api-key": key}
                    )
                    if history.status_code != 503:
                        break
                    time.sleep(0.2)
                users = [m["content"] for m in history.json().get("messages", [])]
                if message not in users:
                    lost.append((session_id, message, history.status_code, users))
            sent = sum(outcomes.values())
            print(
                f"\nRedis killed for 1.5 s under 6 customers: sent {sent}, answered "
                f"{outcomes['done']}, 503s {outcomes['503']}, lost {len(lost)}, other "
                f"{sent - outcomes['done'] - outcomes['503']}, slowest {slowest[0]:.2f} s"
            )
        finally:
            stop.set()
            server.stop()
        assert set(outcomes) <= {"done", "503"}, outcomes
        assert outcomes["503"] > 0  # the outage was felt, as a 503 and nothing worse
        assert outcomes["done"] > 0
        assert lost == []
        assert slowest[0] < 3.0  # nothing waited long on a Redis that was not there
