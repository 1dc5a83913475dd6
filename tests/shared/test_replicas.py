"""Two ``kefu serve`` replicas (FakeEngine) on one redis-server: they act as one.

One limit across both, a session that moves between them with its history, two
messages to one session on two replicas answered one after the other, and an agent's
reply on one reaching the customer's live stream on the other.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e.support import KefuServer, SseFrame, sse_frames
from tests.shared.support import RedisServer, running_redis


def create_key(redis_url: str, *args: str) -> str:
    """``kefu keys create``: the key is the last line of its output."""
    done = subprocess.run(
        [sys.executable, "-m", "kefu", "keys", "create", "--redis", redis_url, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.strip().splitlines()[-1]


@dataclass
class Cluster:
    redis: RedisServer
    replicas: list[KefuServer]
    key: str  # chat + api, a limit no test reaches
    admin: str

    def url(self, i: int) -> str:
        return self.replicas[i % len(self.replicas)].url


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("replicas")
    with running_redis(base / "redis") as redis:
        replicas = [
            KefuServer(
                base / f"data{i}",
                base / f"kefu{i}.log",
                [
                    "--engine",
                    "fake",
                    "--fake-token-delay",
                    "0.02",
                    "--no-second-look",
                    "--no-warmup",
                    "--redis",
                    redis.url,
                    "--auth",
                    "keys",
                    "--rate-limit",
                    "1000/60",
                ],
            )
            for i in range(2)
        ]
        key = create_key(redis.url, "--name", "shop")
        admin = create_key(redis.url, "--name", "desk", "--scope", "admin")
        try:
            for replica in replicas:
                replica.data_dir.mkdir(parents=True)
                replica.start()
            yield Cluster(redis, replicas, key, admin)
        finally:
            for replica in replicas:
                replica.stop()


def post_chat(url: str, key: str, message: str, session_id: str | None = None) -> Any:
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    with httpx.stream(
        "POST", url + "/chat", json=body, headers={"x-api-key": key}, timeout=30
    ) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, response.json()
        frames = list(sse_frames(response.iter_bytes()))
    return 200, frames


def done(frames: list[SseFrame]) -> dict[str, Any]:
    assert frames[-1].event == "done", frames
    data: dict[str, Any] = frames[-1].json()
    return data


def test_one_limit_across_both_replicas(cluster: Cluster) -> None:
    key = create_key(cluster.redis.url, "--name", "limited", "--rate-limit", "10/60")
    with ThreadPoolExecutor(6) as pool:
        statuses = list(
            pool.map(lambda i: post_chat(cluster.url(i), key, f"hello {i}")[0], range(30))
        )
    print(f"\n30 requests over 2 replicas, limit 10/60: {statuses.count(200)} passed, "
          f"{statuses.count(429)} refused with 429")  # fmt: skip
    assert statuses.count(200) == 10
    assert statuses.count(429) == 20


def test_a_session_continues_on_the_other_replica(cluster: Cluster) -> None:
    status, frames = post_chat(cluster.url(0), cluster.key, "my name is Mei")
    assert status == 200
    session_id = done(frames)["session_id"]
    status, frames = post_chat(cluster.url(1), cluster.key, "what is my name?", session_id)
    assert status == 200
    assert done(frames)["session_id"] == session_id
    history = httpx.get(
        f"{cluster.url(0)}/sessions/{session_id}", headers={"x-api-key": cluster.key}
    ).json()
    assert [(m["turn"], m["role"], m["content"]) for m in history["messages"]][::2] == [
        (1, "user", "my name is Mei"),
        (2, "user", "what is my name?"),
    ]
    other = create_key(cluster.redis.url, "--name", "another shop")
    response = httpx.get(f"{cluster.url(1)}/sessions/{session_id}", headers={"x-api-key": other})
    assert response.status_code == 404


def test_two_messages_on_two_replicas_are_answered_in_turn(cluster: Cluster) -> None:
    _, frames = post_chat(cluster.url(0), cluster.key, "start")
    session_id = done(frames)["session_id"]
    spans: dict[int, tuple[float, float]] = {}

    def send(i: int) -> int:
        started = time.monotonic()
        # Thirty words at 20 ms a token: each answer takes more than half a second.
        code, _ = post_chat(cluster.url(i), cluster.key, " ".join(["word"] * 30), session_id)
        spans[i] = (started, time.monotonic())
        return int(code)

    with ThreadPoolExecutor(2) as pool:
        codes = list(pool.map(send, range(2)))
    assert codes == [200, 200]
    (first_end, second_end) = sorted(end for _, end in spans.values())
    assert second_end - first_end > 0.5, spans  # the second waited for the first
    history = httpx.get(
        f"{cluster.url(1)}/sessions/{session_id}", headers={"x-api-key": cluster.key}
    ).json()
    assert [m["turn"] for m in history["messages"]] == [1, 1, 2, 2, 3, 3]


def test_an_agent_reply_reaches_the_stream_on_the_other_replica(cluster: Cluster) -> None:
    status, frames = post_chat(cluster.url(0), cluster.key, "I want to talk to a human")
    assert status == 200
    assert done(frames)["tier"] == "handoff"
    session_id = done(frames)["session_id"]
    received: list[SseFrame] = []
    connected = threading.Event()

    def listen() -> None:
        url = f"{cluster.url(1)}/sessions/{session_id}/events"
        with httpx.stream("GET", url, headers={"x-api-key": cluster.key}, timeout=10) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                if line == ": connected":
                    connected.set()
                if line.startswith("data: "):
                    received.append(SseFrame("agent", line[6:]))
                    return

    listener = threading.Thread(target=listen)
    listener.start()
    assert connected.wait(10)
    time.sleep(0.1)  # the replica's SUBSCRIBE reaches Redis
    reply = httpx.post(
        f"{cluster.url(0)}/agent/sessions/{session_id}/reply",
        json={"message": "Hi, Mei here.", "agent": "mei"},
        headers={"x-api-key": cluster.admin},
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["delivered"] == 1  # one replica had the stream open
    listener.join(10)
    assert [frame.json()["text"] for frame in received] == ["Hi, Mei here."]


def test_a_knowledge_base_change_reaches_the_other_replica(cluster: Cluster) -> None:
    admin = {"x-api-key": cluster.admin}
    entry = {"question": "Do you sell gift cards for the ice rink?", "answer": "Yes, at the till."}
    added = httpx.post(f"{cluster.url(0)}/kb/entries", json=entry, headers=admin)
    assert added.status_code == 201, added.text
    entry_id = added.json()["id"]

    def seen_on(i: int) -> bool:
        url = f"{cluster.url(i)}/kb/entries/{entry_id}"
        return httpx.get(url, headers=admin).status_code == 200

    def within(seconds: float, condition: Any) -> float:
        started = time.monotonic()
        while not condition():
            assert time.monotonic() - started < seconds, "the change did not arrive"
            time.sleep(0.05)
        return time.monotonic() - started

    print(
        f"\nan entry added on replica 0 is on replica 1 after {within(4, lambda: seen_on(1)):.2f} s"
    )
    removed = httpx.delete(f"{cluster.url(1)}/kb/entries/{entry_id}", headers=admin)
    assert removed.status_code == 204
    print(
        f"removed on replica 1, gone on replica 0 after {within(4, lambda: not seen_on(0)):.2f} s"
    )


def test_an_answer_cached_on_one_replica_is_served_by_the_other(cluster: Cluster) -> None:
    question = "How should I look after a wool rug in a humid flat?"
    _, frames = post_chat(cluster.url(0), cluster.key, question)
    assert done(frames)["tier"] == "llm"
    started = time.monotonic()
    while True:
        _, frames = post_chat(cluster.url(1), cluster.key, question)
        if done(frames)["tier"] == "cache":
            break
        assert time.monotonic() - started < 4, "replica 1 never served the cached answer"
        time.sleep(0.2)
    waited = time.monotonic() - started
    print(f"\nan answer cached on replica 0 is served by replica 1 after {waited:.2f} s")


def test_diagnose_reports_redis_with_an_admin_key(cluster: Cluster) -> None:
    post_chat(cluster.url(0), cluster.key, "hello again")
    command = [sys.executable, "-m", "kefu", "diagnose", "--url", cluster.url(0)]
    command += ["--json", "--no-probe", "--min-samples", "1"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2  # no key: it cannot read /stats
    judged = subprocess.run(
        [*command, "--api-key", cluster.admin], capture_output=True, text=True, timeout=60
    )  # fmt: skip
    assert judged.returncode in (0, 1), judged.stderr
    findings = {f["check"]: f for f in json.loads(judged.stdout)["findings"]}
    assert findings["redis"]["message"].startswith("Redis: ")
