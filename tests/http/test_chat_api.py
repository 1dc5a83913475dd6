"""POST /chat: the event stream, the prompt the engine receives, and history handling."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from kefu.engine.base import ChatMessage
from kefu.engine.fake import FakeEngine
from kefu.limits.rates import PromptReading
from kefu.settings import DEFAULT_PERSONA
from tests.conftest import ClientFactory
from tests.http.helpers import (
    FailingEngine,
    SseEvent,
    calibrate,
    counted_on_the_loop,
    parse_sse,
)


def words(text: str) -> int:
    return len(text.split())


def chat_events(client: TestClient, **body: Any) -> list[SseEvent]:
    response = client.post("/chat", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    return parse_sse(response.text)


def chat(client: TestClient, message: str, session_id: str | None = None) -> dict[str, Any]:
    """One turn; returns the done payload after checking the event order."""
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["session_id"] = session_id
    events = chat_events(client, **body)
    kinds = [e.event for e in events]
    assert kinds[0] == "meta"
    assert kinds[-1] == "done"
    assert set(kinds[1:-1]) <= {"token"}
    done: dict[str, Any] = events[-1].json()
    assert done["reply"] == "".join(e.json()["text"] for e in events[1:-1])
    return done


def test_event_order_and_payloads(client: TestClient, fake_engine: FakeEngine) -> None:
    events = chat_events(client, message="where is my parcel")
    assert [e.event for e in events] == ["meta", *["token"] * 7, "done"]

    meta = events[0].json()
    assert set(meta) == {"session_id"}
    session_id = meta["session_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", session_id)

    tokens = [e.json() for e in events[1:-1]]
    assert all(set(t) == {"text"} for t in tokens)
    assert tokens[0] == {"text": "fake"}
    assert tokens[1] == {"text": " reply"}

    done = events[-1].json()
    assert set(done) == {"session_id", "reply", "tier", "route", "source", "usage", "timings"}
    assert done["session_id"] == session_id
    assert done["reply"] == "fake reply to: where is my parcel"
    assert done["reply"] == "".join(t["text"] for t in tokens)
    assert done["tier"] == "llm"
    prompt = words(DEFAULT_PERSONA) + 3 + 4 + 3
    assert done["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": 7,
        "cached_prompt_tokens": 0,
        "total_tokens": prompt + 7,
    }
    timings = done["timings"]
    for key in ("ttft_ms", "e2e_ms", "queue_ms", "prefill_ms", "decode_ms"):
        assert isinstance(timings[key], float | int), key
        assert timings[key] >= 0, key
    assert timings["ttft_ms"] <= timings["e2e_ms"]
    assert timings["received_at_ms"] == 0
    for stage in ("session_locked", "context_built", "admitted", "first_token", "done"):
        assert f"{stage}_at_ms" in timings
    assert (
        timings["session_locked_at_ms"]
        <= timings["context_built_at_ms"]
        <= timings["admitted_at_ms"]
        <= timings["first_token_at_ms"]
        <= timings["done_at_ms"]
    )

    (request,) = fake_engine.requests
    assert request.request_id == session_id
    assert list(request.messages) == [
        ChatMessage("system", DEFAULT_PERSONA),
        ChatMessage("user", "where is my parcel"),
    ]
    assert request.sampling.max_tokens == 256
    assert request.sampling.temperature == 0.3


def test_message_is_stripped(client: TestClient, fake_engine: FakeEngine) -> None:
    done = chat(client, "  hi \n")
    assert done["reply"] == "fake reply to: hi"
    assert fake_engine.requests[-1].messages[-1] == ChatMessage("user", "hi")


def test_unicode_message(client: TestClient) -> None:
    done = chat(client, "我的包裹在哪里 呢")
    assert done["reply"] == "fake reply to: 我的包裹在哪里 呢"


def test_each_new_conversation_gets_its_own_session(client: TestClient) -> None:
    first = chat(client, "a")["session_id"]
    second = chat(client, "b")["session_id"]
    assert first != second


def test_second_message_sees_the_first_turn(client: TestClient, fake_engine: FakeEngine) -> None:
    first = chat(client, "where is my parcel")
    session_id = first["session_id"]
    second = chat(client, "and the refund", session_id)
    assert second["session_id"] == session_id
    assert second["reply"] == "fake reply to: and the refund"

    request = fake_engine.requests[-1]
    assert list(request.messages) == [
        ChatMessage("system", DEFAULT_PERSONA),
        ChatMessage("user", "where is my parcel"),
        ChatMessage("assistant", first["reply"]),
        ChatMessage("user", "and the refund"),
    ]
    assert second["usage"]["prompt_tokens"] == fake_engine.count_chat_tokens(request.messages)


def test_sessions_do_not_mix(client: TestClient, fake_engine: FakeEngine) -> None:
    one = chat(client, "one")["session_id"]
    chat(client, "two")
    chat(client, "again", one)
    contents = [m.content for m in fake_engine.requests[-1].messages]
    assert contents == [DEFAULT_PERSONA, "one", "fake reply to: one", "again"]


@pytest.mark.parametrize("history_turns", [0, 1, 2])
def test_history_turns_limits_the_prompt(
    client_factory: ClientFactory, fake_engine: FakeEngine, history_turns: int
) -> None:
    # --memory window, dropping one turn at a time: exactly the last turns (blocks and
    # summary mode: tests/http/test_memory.py).
    with client_factory(
        history_turns=history_turns, persona="Be kind.", memory="window", memory_every=1
    ) as client:
        session_id = chat(client, "m1")["session_id"]
        for n in (2, 3, 4):
            chat(client, f"m{n}", session_id)
    contents = [m.content for m in fake_engine.requests[-1].messages]
    earlier = [[f"m{n}", f"fake reply to: m{n}"] for n in (1, 2, 3)]
    kept = earlier[len(earlier) - history_turns :] if history_turns else []
    assert contents == ["Be kind.", *(m for turn in kept for m in turn), "m4"]


def test_old_turns_give_way_to_the_context_budget(client_factory: ClientFactory) -> None:
    # Window 128: replies get at most 64 tokens, the prompt the other 64. One turn of
    # ten-word messages is 13 + 16 tokens, so only the newest turn fits beside the message.
    engine = FakeEngine(context_window=128)
    ten = " ".join(["word"] * 10)
    with client_factory(engine=engine, persona="Be kind.", history_turns=3) as client:
        session_id = chat(client, f"first {ten}")["session_id"]
        chat(client, f"second {ten}", session_id)
        done = chat(client, f"third {ten}", session_id)
    request = engine.requests[-1]
    assert [m.content.split()[0] for m in request.messages] == ["Be", "second", "fake", "third"]
    assert request.sampling.max_tokens == 64
    assert done["usage"]["prompt_tokens"] <= 64


@pytest.mark.parametrize("fit", [True, False], ids=["fit-to-slo", "no-fit-to-slo"])
def test_a_prompt_too_long_to_read_in_time_loses_its_oldest_turn(
    client_factory: ClientFactory, fake_engine: FakeEngine, fit: bool
) -> None:
    """An engine measured at 10 ms a prompt token reads 200 in the 2 s SLO: a fourth turn
    of 30-word messages (~245 tokens: a turn is 33 + 36) goes without its oldest turn,
    and says so."""
    thirty = " ".join(["word"] * 29)
    with client_factory(
        persona="Be kind.", memory="window", memory_every=1, ttft_slo=2.0, fit_to_slo=fit
    ) as client:
        session_id = chat(client, f"m1 {thirty}")["session_id"]
        for n in (2, 3):
            chat(client, f"m{n} {thirty}", session_id)
        reading = PromptReading()
        for tokens, seconds in ((1, 0.01), (101, 1.01)):
            reading.add(tokens, seconds)
        admission = client.app.state.runtime.admission  # type: ignore[attr-defined]
        admission.rate.reading = reading
        calibrate(admission)  # outcomes that say the estimates hold: the whole SLO to read in
        done = chat(client, f"m4 {thirty}", session_id)
        stored = client.get(f"/sessions/{session_id}").json()["messages"][-1]["meta"]
        metrics = client.get("/metrics").text
    firsts = [m.content.split()[0] for m in fake_engine.requests[-1].messages]
    if fit:
        assert firsts == ["Be", "m2", "fake", "m3", "fake", "m4"]
        assert stored["fitted"] == {"tokens": 33 + 36, "turns": 1, "passages": 0}
        assert done["usage"]["prompt_tokens"] <= 200
        assert 'kefu_tokens_total{kind="fitted_out"} 69.0' in metrics
        assert "kefu_fitted_prompts_total 1.0" in metrics
    else:
        assert firsts == ["Be", "m1", "fake", "m2", "fake", "m3", "fake", "m4"]
        assert "fitted" not in stored
        assert 'kind="fitted_out"' not in metrics
        assert "kefu_fitted_prompts_total 0.0" in metrics


def test_persona_setting_is_the_system_prompt(
    client_factory: ClientFactory, fake_engine: FakeEngine
) -> None:
    with client_factory(persona="You sell bicycles.") as client:
        chat(client, "hi")
    assert fake_engine.requests[-1].messages[0] == ChatMessage("system", "You sell bicycles.")


def test_reply_length_is_capped(client_factory: ClientFactory) -> None:
    engine = FakeEngine(reply_words=50)
    with client_factory(engine=engine, max_tokens=5) as client:
        done = chat(client, "hi")
    assert done["reply"] == "w0 w1 w2 w3 w4"
    assert done["usage"]["completion_tokens"] == 5


def test_engine_failure_mid_stream_is_an_error_event(client_factory: ClientFactory) -> None:
    engine = FailingEngine(good_tokens=2)
    with client_factory(engine=engine) as client:
        events = chat_events(client, message="where is my parcel")
        assert [e.event for e in events] == ["meta", "token", "token", "error"]
        error = events[-1].json()["error"]
        assert error["type"] == "server_error"
        assert error["code"] == "engine_error"
        assert set(error) == {"message", "type", "param", "code"}

        # The partial turn is kept, marked as failed.
        session_id = events[0].json()["session_id"]
        stored = client.get(f"/sessions/{session_id}").json()["messages"]
        assert [(m["role"], m["content"]) for m in stored] == [
            ("user", "where is my parcel"),
            ("assistant", "fake reply"),
        ]
        assert stored[1]["meta"]["finish_reason"] == "error"

        # The partial reply is context for the next turn (only empty replies are left out).
        engine.good_tokens = 100
        chat(client, "again", session_id)
    contents = [m.content for m in engine.requests[-1].messages]
    assert contents == [DEFAULT_PERSONA, "where is my parcel", "fake reply", "again"]


def test_openai_engine_failure_mid_stream(client_factory: ClientFactory) -> None:
    engine = FailingEngine(good_tokens=1)
    with client_factory(engine=engine) as client:
        response = client.post(
            "/v1/chat/completions",
            json={"stream": True, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert response.status_code == 200
        events = parse_sse(response.text)
        assert events[-1].data == "[DONE]"
        error = events[-2].json()["error"]
        assert error["code"] == "engine_error"
        assert events[1].json()["choices"][0]["delta"] == {"content": "fake"}

        response = client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
        )
        assert response.status_code == 500
        assert response.json()["error"]["code"] == "engine_error"


def test_the_prompt_is_tokenized_off_the_event_loop(
    client: TestClient, fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    loops = counted_on_the_loop(fake_engine, monkeypatch)
    chat(client, "What is the capital of France?")
    assert loops[0] is False  # building the context (the fake engine counts again itself)
