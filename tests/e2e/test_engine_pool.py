"""A kefu in front of two real engines: llama-cpp-python's server and another ``kefu serve``,
both on the bundled model. The tests run in order on one pool: a conversation stays on one
engine; an engine that hangs (SIGSTOP: its socket accepts, nothing answers) trips the
first-token timeout and its breaker, and restarting it closes the breaker; an engine killed
under load fails no request that had not started streaming, and the survivor takes the rest.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from kefu.api.openai.serving import conversation_key
from kefu.engine.base import ChatMessage
from kefu.engine.routing import rendezvous_score
from tests.e2e.support import KefuServer, chat_stream, running_kefu, wait_for
from tests.e2e.upstreams import llama_cpp_server

pytestmark = pytest.mark.e2e

FIRST_TOKEN_TIMEOUT = 4.0  # past the /chat keep-alive (3 s), so a hung engine shows one
MAX_TOKENS = 12


@dataclass
class Pool:
    front: KefuServer
    stable: str  # the llama_cpp.server engine's name in the pool
    victim: KefuServer  # the kefu upstream the tests hang and kill
    victim_name: str


def engine_name(url: str) -> str:
    return url.split("://", 1)[1].removesuffix("/v1")


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    base = tmp_path_factory.mktemp("kefu-pool")
    (base / "victim").mkdir()
    (base / "front").mkdir()
    victim_flags = ["--no-fast-path", "--threads", "1", "--parallel", "4"]
    with (
        llama_cpp_server(base / "llama-cpp-server.log") as stable_url,
        running_kefu(base / "victim", *victim_flags) as victim,
    ):
        victim_url = victim.url + "/v1"
        front_flags = [
            *("--engine", stable_url, "--engine", victim_url),
            *("--first-token-timeout", str(FIRST_TOKEN_TIMEOUT)),
            *("--breaker-failures", "2", "--breaker-cooldown", "1"),
            *("--engine-check-interval", "0.5", "--no-fast-path", "--parallel", "16"),
            # Failover is judged here, not admission: on a busy 2-core box six prompts at
            # once take longer than the default 2 s SLO to read, and some would (rightly)
            # be refused before any engine saw them.
            *("--ttft-slo", "60"),
            *("--max-tokens", str(MAX_TOKENS)),
        ]
        with running_kefu(base / "front", *front_flags) as front:
            yield Pool(front, engine_name(stable_url), victim, engine_name(victim_url))


def rows(pool: Pool) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in pool.front.ready_state()["engine"]["engines"]}


def conversation_homed_at(pool: Pool, name: str, tag: str) -> list[dict[str, str]]:
    """The first message of a /v1 conversation whose affinity home is ``name``."""
    names = [pool.stable, pool.victim_name]
    for i in range(1000):
        messages = [{"role": "user", "content": f"{tag} {i}: what is your returns policy?"}]
        key = conversation_key([ChatMessage("user", messages[0]["content"])])
        if max(names, key=lambda n: rendezvous_score(key, n)) == name:
            return messages
    raise AssertionError("no key homed there")


def completion(pool: Pool, messages: list[dict[str, str]]) -> dict[str, Any]:
    body = {"messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0}
    response = httpx.post(pool.front.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_a_session_stays_on_one_engine(pool: Pool) -> None:
    with httpx.Client(base_url=pool.front.url, timeout=60) as http:
        frames = chat_stream(http, "Hello, I have a question about my sofa.")
        session = frames[-1].json()["session_id"]
        engines = {frames[-1].json()["routed"]["engine"]}
        for message in ("It is grey.", "Can I wash the covers?", "Thanks, and the legs?"):
            done = chat_stream(http, message, session_id=session)[-1].json()
            engines.add(done["routed"]["engine"])
            assert done["routed"]["why"] == "affinity"
            assert done["timings"]["upstream_ttft_ms"] > 0
    assert len(engines) == 1
    # /v1: every turn of a conversation keeps its first messages, so its key and engine.
    before = {name: row["requests"] for name, row in rows(pool).items()}
    messages = conversation_homed_at(pool, pool.stable, "affinity")
    for turn in range(3):
        reply = completion(pool, messages)["choices"][0]["message"]["content"]
        messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": f"{turn}?"},
        ]
    after = rows(pool)
    assert after[pool.stable]["requests"] - before[pool.stable] == 3
    assert after[pool.victim_name]["requests"] == before[pool.victim_name]


def chat_raw(pool: Pool, message: str, session_id: str | None = None) -> bytes:
    body = {"message": message} | ({"session_id": session_id} if session_id else {})
    with httpx.stream("POST", pool.front.url + "/chat", json=body, timeout=60) as response:
        assert response.status_code == 200
        return b"".join(response.iter_bytes())


def done_of(raw: bytes) -> dict[str, Any]:
    frame = raw.rsplit(b"event: done\ndata: ", 1)[1]
    done: dict[str, Any] = json.loads(frame.split(b"\n\n", 1)[0])
    return done


def test_a_hung_engine_trips_the_first_token_timeout_and_its_breaker(pool: Pool) -> None:
    # A /chat session whose engine is the one about to hang.
    for _ in range(12):
        done = done_of(chat_raw(pool, "Hi, do you sell lamps?"))
        if done["routed"]["engine"] == pool.victim_name:
            break
    assert done["routed"]["engine"] == pool.victim_name
    pool.victim.send_signal(signal.SIGSTOP)
    try:
        messages = conversation_homed_at(pool, pool.victim_name, "hang")
        with ThreadPoolExecutor(2) as both:
            chat = both.submit(chat_raw, pool, "And floor lamps?", done["session_id"])
            v1 = both.submit(completion, pool, messages)
            raw, answer = chat.result(), v1.result()
        # The customer waited one first-token timeout, was told so, and got an answer
        # from the other engine.
        assert b": waiting" in raw
        routed = done_of(raw)["routed"]
        assert routed["engine"] == pool.stable
        assert routed["attempts"] == 2
        assert f"after {pool.victim_name} failed" in routed["why"]
        assert answer["choices"][0]["message"]["content"]
        wait_for(lambda: rows(pool)[pool.victim_name]["breaker"] == "open", "the breaker")
        assert rows(pool)[pool.victim_name]["timeouts"] >= 1
        # Open: requests homed there go straight to the other engine, with no wait.
        started = time.perf_counter()
        completion(pool, conversation_homed_at(pool, pool.victim_name, "open"))
        assert time.perf_counter() - started < FIRST_TOKEN_TIMEOUT
    finally:
        pool.victim.send_signal(signal.SIGKILL)
    pool.victim.restart()  # the same port: the engine is back
    wait_for(lambda: rows(pool)[pool.victim_name]["breaker"] != "open", "a passing check")
    for i in range(20):
        completion(pool, conversation_homed_at(pool, pool.victim_name, f"back {i}"))
        if rows(pool)[pool.victim_name]["breaker"] == "closed":
            break
    assert rows(pool)[pool.victim_name]["breaker"] == "closed"


@dataclass
class Outcome:
    text: str = ""
    status: int = 0
    error: str | None = None


async def stream_one(client: httpx.AsyncClient, url: str, i: int) -> Outcome:
    body = {
        "messages": [{"role": "user", "content": f"Customer {i}: where is my parcel?"}],
        "max_tokens": 24,
        "stream": True,
    }
    outcome = Outcome()
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        outcome.status = response.status_code
        if response.status_code != 200:
            outcome.error = (await response.aread()).decode()
            return outcome
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                outcome.error = chunk["error"]["message"]
                continue
            for choice in chunk["choices"]:
                outcome.text += choice["delta"].get("content") or ""
    return outcome


async def load_while_killing(pool: Pool, requests: int, concurrency: int) -> list[Outcome]:
    gate = asyncio.Semaphore(concurrency)

    async def one(client: httpx.AsyncClient, i: int) -> Outcome:
        async with gate:
            return await stream_one(client, pool.front.url, i)

    async def kill_when_busy() -> None:
        async with httpx.AsyncClient(timeout=5) as probe:
            for _ in range(300):
                state = (await probe.get(pool.front.url + "/ready")).json()
                busy = {r["name"]: r["in_flight"] for r in state["engine"]["engines"]}
                if busy[pool.victim_name] >= 2:
                    break
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # some of its replies are streaming by now, some queued
        pool.victim.send_signal(signal.SIGKILL)

    async with httpx.AsyncClient(timeout=120) as client:
        results = await asyncio.gather(kill_when_busy(), *(one(client, i) for i in range(requests)))
    return [r for r in results if isinstance(r, Outcome)]


def test_killing_an_engine_under_load_fails_only_replies_already_streaming(
    pool: Pool, capsys: pytest.CaptureFixture[str]
) -> None:
    before = rows(pool)[pool.victim_name]
    outcomes = asyncio.run(load_while_killing(pool, requests=12, concurrency=6))
    answered = [o for o in outcomes if o.error is None]
    mid_stream = [o for o in outcomes if o.error is not None and o.text]
    refused = [o for o in outcomes if o.error is not None and not o.text]
    victim = rows(pool)[pool.victim_name]
    failures = victim["failures"] - before["failures"]
    retried = failures - len(mid_stream)
    with capsys.disabled():
        print(
            f"\nfailover: {len(outcomes)} sent, {len(answered)} answered, {retried} failed "
            f"before the first byte (retried on the survivor), {len(mid_stream)} failed "
            f"mid-stream, {len(refused)} failed without text"
        )
    assert refused == [], [o.error for o in refused]
    assert all(o.status == 200 for o in outcomes)
    assert len(answered) + len(mid_stream) == len(outcomes)
    assert all("failed" in (o.error or "") or "closed" in (o.error or "") for o in mid_stream)
    # Later requests go to the survivor, at once.
    wait_for(lambda: rows(pool)[pool.victim_name]["breaker"] == "open", "the breaker")
    survivor_before = rows(pool)[pool.stable]["requests"]
    for i in range(3):
        completion(pool, conversation_homed_at(pool, pool.victim_name, f"after {i}"))
    assert rows(pool)[pool.stable]["requests"] - survivor_before == 3
    status = pool.front.ready_state()["engine"]["token_counting"]
    assert "extras/tokenize" in status  # llama_cpp.server answered first: its tokenizer counts


def test_logs_are_kept(pool: Pool) -> None:
    """The pool logged each engine going down and coming back (an operator's first clue)."""
    log = pool.front.log_path.read_text(encoding="utf-8")
    assert f"engine {pool.victim_name} is down" in log
    assert f"engine {pool.victim_name} is up" in log
