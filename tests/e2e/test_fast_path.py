"""The fast path over real HTTP on a real ``kefu serve`` (bundled model, demo KB, demo orders).

Every tier of ``/chat``: faq (EN and ZH), tool, smalltalk, llm with the model's own tokens,
cache; a handoff whose agent reply reaches the customer's open ``/sessions/{id}/events``
stream; ``kefu kb import`` run beside the running server; and ``/metrics`` counting the tiers.
No assertion is about speed: every wait is bounded only so that nothing can hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest

from kefu import demo
from tests.e2e.conftest import CHAT_MAX_TOKENS
from tests.e2e.support import KefuServer, chat_stream, sse_frames

pytestmark = pytest.mark.e2e

# A general question the demo KB does not cover, which the small model answers in a few words
# (an answer cut at --max-tokens is never cached, so a short one is needed for the cache tier).
GENERAL_QUESTION = "What is the capital of Japan?"
LLM_TRIES = 6  # temperature 0.3: a reply may still run to the token cap; retry in new sessions
EVENT_WAIT_S = 10.0  # the agent's reply arrives at once; this only bounds a broken stream
KB_POLL_S = 15.0  # the server looks for kb changes every 2 s
ANSWERS = re.compile(r'^kefu_answers_total\{tier="(\w+)"\} ([0-9.e+]+)$', re.MULTILINE)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def demo_rows(lang: str) -> list[dict[str, str]]:
    text = resources.files("kefu.demo").joinpath(f"kb/shop_{lang}.csv").read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


@dataclass(frozen=True)
class Answer:
    events: list[str]  # event names in the order they arrived
    tokens: list[str]
    by_name: dict[str, dict[str, Any]]  # the last frame of each event name

    @property
    def done(self) -> dict[str, Any]:
        return self.by_name["done"]

    @property
    def session_id(self) -> str:
        session_id: str = self.done["session_id"]
        return session_id


def chat(http: httpx.Client, message: str, session_id: str | None = None) -> Answer:
    frames = chat_stream(http, message, session_id)
    events = [frame.event or "" for frame in frames]
    tokens = [frame.json()["text"] for frame in frames if frame.event == "token"]
    answer = Answer(events, tokens, {frame.event or "": frame.json() for frame in frames})
    assert answer.by_name["meta"]["session_id"] == answer.session_id
    assert answer.done["reply"] == "".join(tokens)
    return answer


def assert_fast(answer: Answer, tier: str) -> None:
    """Answered without the model: one token frame with the whole reply, no tokens counted."""
    done = answer.done
    assert done["tier"] == tier, done
    assert answer.events == ["meta", "token", "done"], answer.events
    assert done["reply"].strip()
    assert done["usage"]["completion_tokens"] == 0
    assert done["usage"]["prompt_tokens"] == 0


def stored(http: httpx.Client, session_id: str) -> dict[str, Any]:
    """GET /sessions/{id}; it waits for the session's pending write, so the turn is there."""
    response = http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def answer_counts(http: httpx.Client) -> dict[str, float]:
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    return {tier: float(value) for tier, value in ANSWERS.findall(response.text)}


# -- the tiers ------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_demo_question_is_answered_from_the_kb(http: httpx.Client, lang: str) -> None:
    entry = demo_rows(lang)[0]
    answer = chat(http, entry["question"])
    assert_fast(answer, "faq")
    done = answer.done
    assert done["reply"] == entry["answer"]
    assert done["source"]["kind"] == "kb"
    assert done["source"]["question"] == entry["question"]
    assert done["route"]["intent"] == "faq"
    assert done["timings"]["ttft_ms"] > 0
    turn = stored(http, answer.session_id)["messages"]
    assert [m["role"] for m in turn] == ["user", "assistant"]
    assert turn[1]["content"] == entry["answer"]
    assert turn[1]["meta"]["tier"] == "faq"


def test_an_order_number_is_looked_up_by_the_tool(http: httpx.Client) -> None:
    answer = chat(http, "Where is my order LH-100001?")
    assert_fast(answer, "tool")
    done = answer.done
    assert done["route"]["intent"] == "order_status"
    assert "LH-100001" in done["reply"]
    order = next(o for o in demo.sample_orders(date.today()) if o.id == "LH-100001")
    for item in order.items:  # the demo order's items, from orders.db in the data dir
        assert item in done["reply"], (item, done["reply"])


def test_a_greeting_is_smalltalk(http: httpx.Client) -> None:
    answer = chat(http, "hi")
    assert_fast(answer, "smalltalk")
    assert answer.done["route"]["intent"] == "smalltalk"
    assert answer.done["reply"] != "hi"


def llm_until_cached(http: httpx.Client, question: str) -> tuple[list[Answer], Answer]:
    """Ask in new sessions until the model's reply ends by itself (one cut at --max-tokens
    is not cached), then once more: the model's answers, and the cached one."""
    answers: list[Answer] = []
    finish_reasons = []
    while len(answers) < LLM_TRIES:
        answer = chat(http, question)  # a new session each time
        answers.append(answer)
        done = answer.done
        assert done["tier"] == "llm", done
        assert done["route"]["intent"] == "general"
        assert set(answer.events[1:-1]) == {"token"}, answer.events
        assert done["reply"].strip()
        assert 0 < done["usage"]["completion_tokens"] <= CHAT_MAX_TOKENS
        assert done["usage"]["prompt_tokens"] > 0
        reply = stored(http, answer.session_id)["messages"][-1]
        assert reply["content"] == done["reply"]
        finish_reasons.append(reply["meta"]["finish_reason"])
        if reply["meta"]["finish_reason"] == "stop":
            break
    else:
        raise AssertionError(f"no reply ended by itself in {LLM_TRIES} tries: {finish_reasons}")
    # A new session: nothing in the answer depends on an earlier turn.
    cached = chat(http, question)
    assert_fast(cached, "cache")
    return answers, cached


def test_a_general_question_goes_to_the_model_then_the_cache(http: httpx.Client) -> None:
    answers, cached = llm_until_cached(http, GENERAL_QUESTION)
    first = answers[-1]
    assert first.tokens  # the model's tokens, streamed as it wrote them
    assert cached.session_id != first.session_id
    assert cached.done["reply"] == first.done["reply"]
    assert cached.done["source"]["kind"] == "cache"
    assert cached.done["source"]["question"] == GENERAL_QUESTION
    assert cached.done["route"]["intent"] == "general"


# -- handoff: the agent's reply reaches the customer's open stream ----------------------------


async def read_session_events(
    client: httpx.AsyncClient, session_id: str, frames: asyncio.Queue[tuple[str, str]]
) -> None:
    """Put each frame of GET /sessions/{id}/events on ``frames``: (event, data), and
    ("comment", text) for a comment such as ``: connected``."""
    async with client.stream("GET", f"/sessions/{session_id}/events") as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        buffer = b""
        async for chunk in response.aiter_bytes():
            buffer += chunk
            while b"\n\n" in buffer:
                raw, buffer = buffer.split(b"\n\n", 1)
                event, data = "message", []
                for line in raw.decode("utf-8").split("\n"):
                    if line.startswith(":"):
                        await frames.put(("comment", line[1:].strip()))
                    elif line.startswith("event: "):
                        event = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        data.append(line.removeprefix("data: "))
                    else:
                        raise AssertionError(f"not an SSE line: {line!r}")
                if data:
                    await frames.put((event, "\n".join(data)))


async def next_frame(
    frames: asyncio.Queue[tuple[str, str]], reader: asyncio.Task[None], *, comments: bool = False
) -> tuple[str, Any]:
    """The next frame, as (event, data as JSON), or ("comment", text) when ``comments``;
    fails if the stream ended or nothing came in EVENT_WAIT_S."""
    while True:
        getter = asyncio.ensure_future(frames.get())
        done, _ = await asyncio.wait(
            {getter, reader}, timeout=EVENT_WAIT_S, return_when=asyncio.FIRST_COMPLETED
        )
        if getter not in done:
            getter.cancel()
            if reader in done:
                reader.result()  # raises what failed the stream
                raise AssertionError("the session's event stream ended")
            raise AssertionError(f"nothing on the session's stream in {EVENT_WAIT_S:g} s")
        name, data = getter.result()
        if name == "comment":
            if comments:
                return name, data
            continue  # a keep-alive
        return name, json.loads(data)


@pytest.mark.anyio
async def test_a_handoff_and_the_agents_reply_on_the_customers_stream(base_url: str) -> None:
    # The event stream sends a keep-alive comment every 15 s, so a read timeout bounds it too.
    async with httpx.AsyncClient(base_url=base_url, timeout=120.0) as client:
        response = await client.post("/chat", json={"message": "I want to talk to a human"})
        assert response.status_code == 200, response.text
        frames = list(sse_frames([response.content]))
        assert [f.event for f in frames] == ["meta", "token", "handoff", "done"]
        done, handoff = frames[-1].json(), frames[2].json()
        session_id = done["session_id"]
        assert done["tier"] == "handoff"
        assert done["route"]["intent"] == "handoff"
        assert handoff["session_id"] == session_id
        assert handoff["events"] == f"/sessions/{session_id}/events"
        assert isinstance(handoff["agents_available"], bool)
        assert handoff["service_hours"]

        waiting = (await client.get("/agent/sessions")).json()["sessions"]
        mine = [w for w in waiting if w["session_id"] == session_id]
        assert len(mine) == 1, waiting
        assert mine[0]["last_message"] == "I want to talk to a human"

        # While a human owns the session the bot only acknowledges; no model is asked.
        response = await client.post(
            "/chat", json={"message": "hello? anyone there?", "session_id": session_id}
        )
        held = list(sse_frames([response.content]))[-1].json()
        assert held["tier"] == "handoff"
        assert held["usage"]["completion_tokens"] == 0

        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        reader = asyncio.create_task(read_session_events(client, session_id, queue))
        try:
            # The stream subscribes before it says so: after ": connected" nothing is missed.
            assert await next_frame(queue, reader, comments=True) == ("comment", "connected")

            sent = await client.post(
                f"/agent/sessions/{session_id}/reply",
                json={"message": "Hi, I'm Mei from Lumen Home. 我来帮您。", "agent": "mei"},
            )
            assert sent.status_code == 201, sent.text
            assert sent.json()["delivered"] == 1
            name, data = await next_frame(queue, reader)
            assert name == "agent"
            assert data["text"] == "Hi, I'm Mei from Lumen Home. 我来帮您。"
            assert data["agent"] == "mei"

            released = await client.post(f"/agent/sessions/{session_id}/release")
            assert released.status_code == 204, released.text
            name, data = await next_frame(queue, reader)
            assert (name, data["state"]) == ("state", "bot")
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

        session = (await client.get(f"/sessions/{session_id}")).json()
        assert session["state"] == "bot"
        last = session["messages"][-1]
        assert last["role"] == "assistant"
        assert last["content"] == "Hi, I'm Mei from Lumen Home. 我来帮您。"
        assert last["meta"] == {"tier": "agent", "agent": "mei"}
        waiting = (await client.get("/agent/sessions")).json()["sessions"]
        assert session_id not in [w["session_id"] for w in waiting]

    # Handed back: the bot answers again.
    with httpx.Client(base_url=base_url, timeout=120.0) as http:
        assert_fast(chat(http, "hi", session_id), "smalltalk")


# -- the knowledge base changes under the running server -------------------------------------


def kb_questions(http: httpx.Client) -> list[str]:
    response = http.get("/kb")
    assert response.status_code == 200, response.text
    return [entry["question"] for entry in response.json()["entries"]]


def test_kb_import_beside_the_running_server_answers_as_faq(
    http: httpx.Client, kefu_server: KefuServer, tmp_path: Path
) -> None:
    question = "Do you run a lantern repair workshop on Saturdays?"
    answer = "Yes: every Saturday at 10:00 in our Lumen Lane showroom, SGD 15 per lantern."
    assert question not in kb_questions(http)

    path = tmp_path / "workshop.csv"
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["question", "answer", "category"])
        writer.writerow([question, answer, "services"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEFU_")}
    command = [sys.executable, "-m", "kefu", "kb", "import", str(path)]
    command += ["--data-dir", str(kefu_server.data_dir)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "1 added" in result.stdout, result.stdout

    # The server reads the file's changes every 2 s. Poll its KB (no model asked), then chat.
    deadline = time.monotonic() + KB_POLL_S
    while question not in kb_questions(http):
        if time.monotonic() > deadline:
            raise AssertionError(f"the server did not see the import in {KB_POLL_S:g} s")
        time.sleep(0.2)
    after = chat(http, question)
    assert_fast(after, "faq")
    assert after.done["reply"] == answer
    assert after.done["source"]["kind"] == "kb"
    assert after.done["source"]["question"] == question
    listed = http.get("/kb", params={"category": "services"}).json()["entries"]
    assert [(e["question"], e["answer"]) for e in listed] == [(question, answer)]


# -- /metrics ------------------------------------------------------------------------------


def test_metrics_count_every_tier(http: httpx.Client) -> None:
    before = answer_counts(http)
    chat(http, demo_rows("en")[0]["question"])  # faq
    chat(http, demo_rows("zh")[0]["question"])  # faq
    chat(http, "订单 LH-100002 到哪了？")  # tool
    chat(http, "thank you!")  # smalltalk
    chat(http, "转人工")  # handoff
    answers, _ = llm_until_cached(http, "What is 2 + 2?")  # llm, then cache
    counted = {"faq": 2, "tool": 1, "smalltalk": 1, "handoff": 1, "llm": len(answers), "cache": 1}
    expected = {tier: before.get(tier, 0.0) + n for tier, n in counted.items()}
    # A request is counted once its last byte is sent, which may be just after the client
    # has read it: poll briefly.
    deadline = time.monotonic() + 5.0
    while True:
        after = answer_counts(http)
        if all(after.get(tier) == n for tier, n in expected.items()):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"answers counted {after}, expected {expected} (was {before})")
        time.sleep(0.05)
