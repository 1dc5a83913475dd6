"""Every tier of /chat in process: the demo KB, the answer cache, tools, handoff, smalltalk.

The engine is the FakeEngine (it echoes the message), so an ``llm`` answer is recognisable;
the embedder is the real static word table and the KB the real demo, copied per test.
"""

from __future__ import annotations

import asyncio
import csv
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from kefu import demo
from kefu.engine.base import ChatMessage, GenerationRequest
from kefu.engine.fake import FakeEngine
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.service.read_ahead import REQUEST_ID as READ_AHEAD
from kefu.service.runtime import Runtime
from tests.conftest import ClientFactory
from tests.http.helpers import assert_envelope, make_app, parse_sse, serve


def demo_rows(lang: str) -> list[dict[str, str]]:
    text = resources.files("kefu.demo").joinpath(f"kb/shop_{lang}.csv").read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


@pytest.fixture
def fast(client_factory: ClientFactory) -> Iterator[TestClient]:
    with client_factory(fast_path=True) as client:
        yield client


def chat(client: TestClient, message: str, **fields: Any) -> dict[str, Any]:
    """POST /chat; the events by name (the last of each) plus their order under "_order"."""
    response = client.post("/chat", json={"message": message, **fields})
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    result: dict[str, Any] = {e.event or "message": e.json() for e in events}
    result["_order"] = [e.event for e in events]
    result["_text"] = "".join(e.json()["text"] for e in events if e.event == "token")
    return result


def settle(client: TestClient, session_id: str) -> None:
    """The turn is stored after the reply; GET waits for that write."""
    assert client.get(f"/sessions/{session_id}").status_code == 200


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_demo_question_is_answered_from_the_kb(fast: TestClient, lang: str) -> None:
    entry = demo_rows(lang)[3]
    result = chat(fast, entry["question"])
    done = result["done"]
    assert result["_order"] == ["meta", "token", "done"]
    assert done["tier"] == "faq"
    assert done["reply"] == entry["answer"] == result["_text"]
    assert done["source"]["kind"] == "kb"
    assert done["source"]["question"] == entry["question"]
    assert done["route"]["intent"] == "faq"
    assert done["timings"]["ttft_ms"] > 0
    assert done["usage"]["completion_tokens"] == 0  # no model was asked


@pytest.mark.parametrize(
    ("message", "kind"), [("hi", "en"), ("thank you!", "en"), ("你好", "zh"), ("谢谢", "zh")]
)
def test_smalltalk(fast: TestClient, message: str, kind: str) -> None:
    done = chat(fast, message)["done"]
    assert done["tier"] == "smalltalk"
    assert done["route"]["intent"] == "smalltalk"
    assert done["reply"]
    assert done["reply"] != message


def test_order_status_known_and_unknown(fast: TestClient) -> None:
    known = chat(fast, "where is my order LH-100001?")["done"]
    assert known["tier"] == "tool"
    assert known["route"]["intent"] == "order_status"
    assert "LH-100001" in known["reply"]
    unknown = chat(fast, "订单 LH-999999 到哪了")["done"]
    assert unknown["tier"] == "tool"
    assert "LH-999999" in unknown["reply"]
    assert unknown["reply"] != known["reply"]


def test_a_mistyped_order_number_is_pointed_out(fast: TestClient) -> None:
    done = chat(fast, "where is my order LH-10023?")["done"]
    assert (done["tier"], done["route"]["intent"]) == ("tool", "order_status")
    assert done["reply"].startswith("LH-10023 doesn't look like one of our order numbers")
    assert "LH-100234" in done["reply"]


def test_templated_replies_name_the_shop_and_its_order_numbers(
    client_factory: ClientFactory,
) -> None:
    own = {"order_pattern": r"\bAB\d{5}\b", "order_example": "AB12345", "shop_name": "Acme|艾克美"}
    with client_factory(fast_path=True, **own) as shop:
        asked = chat(shop, "where is my order?")["done"]
        assert "AB12345" in asked["reply"]  # the shop's own shape, not the demo's
        mistyped = chat(shop, "订单 AB1234 到哪了")["done"]
        assert mistyped["reply"].startswith("AB1234 不是有效的订单号")
        assert "Acme" in chat(shop, "hello")["done"]["reply"]
        greeting = chat(shop, "你好")["done"]["reply"]
        assert "艾克美" in greeting
        assert "流明" not in greeting


def test_a_general_question_goes_to_the_llm_then_the_cache(fast: TestClient) -> None:
    question = "Do you sell replacement glass for storm lanterns?"
    first = chat(fast, question)["done"]
    assert first["tier"] == "llm"
    assert first["route"]["intent"] == "general"
    settle(fast, first["session_id"])
    again = chat(fast, question)["done"]  # a new session: nothing depends on earlier turns
    assert again["tier"] == "cache"
    assert again["reply"] == first["reply"]
    assert again["source"]["kind"] == "cache"
    assert again["source"]["question"] == question


def test_the_entity_guard_keeps_a_near_miss_off_the_cache(client_factory: ClientFactory) -> None:
    # A threshold so loose that the distance alone would serve the near miss: the
    # guard is what refuses it.
    with client_factory(fast_path=True, cache_threshold=0.5) as loose:
        first = chat(loose, "Is there a car park near your office in Singapore?")["done"]
        assert first["tier"] == "llm"
        settle(loose, first["session_id"])
        near_miss = chat(loose, "Is there a car park near your office in Malaysia?")["done"]
        assert near_miss["tier"] == "llm"
        assert "Malaysia" in near_miss["reply"]  # the FakeEngine echoes the new question


def test_answers_after_the_first_turn_or_with_an_order_id_are_not_cached(
    fast: TestClient,
) -> None:
    opening = chat(fast, "Do you sell scented candles in glass jars?")["done"]
    settle(fast, opening["session_id"])
    follow_up = "And do you sell matching candle lids?"
    second = chat(fast, follow_up, session_id=opening["session_id"])["done"]
    assert second["tier"] == "llm"
    settle(fast, opening["session_id"])
    assert chat(fast, follow_up)["done"]["tier"] == "llm"  # it depended on the first turn


def test_a_follow_up_is_never_cached_nor_served_from_the_cache(fast: TestClient) -> None:
    # Even as a first message, "and what about Japan?" means what the conversation says.
    first = chat(fast, "And what about Japan?")["done"]
    assert first["tier"] == "llm"
    assert first["route"]["reason"] == "the message follows on from an earlier one"
    settle(fast, first["session_id"])
    assert chat(fast, "And what about Japan?")["done"]["tier"] == "llm"


def test_a_kb_change_evicts_the_cached_answers_it_affects(fast: TestClient) -> None:
    question = "Do you offer engraving on wooden chopping boards?"
    first = chat(fast, question)["done"]
    settle(fast, first["session_id"])
    assert chat(fast, question)["done"]["tier"] == "cache"
    answer = "Yes: engraving costs SGD 12 and adds 2 business days."
    created = fast.post("/kb/entries", json={"question": question, "answer": answer})
    assert created.status_code == 201, created.text
    after = chat(fast, question)["done"]
    assert after["tier"] == "faq"
    assert after["reply"] == answer
    # Removing the entry must not bring the stale LLM answer back.
    assert fast.delete(f"/kb/entries/{created.json()['id']}").status_code == 204
    assert chat(fast, question)["done"]["tier"] == "llm"


def test_asking_for_a_human_hands_off_and_an_agent_replies(fast: TestClient) -> None:
    result = chat(fast, "I want to talk to a real person")
    assert result["_order"] == ["meta", "token", "handoff", "done"]
    session_id = result["done"]["session_id"]
    assert result["done"]["tier"] == "handoff"
    assert result["handoff"]["session_id"] == session_id
    assert result["handoff"]["events"] == f"/sessions/{session_id}/events"
    settle(fast, session_id)

    waiting = fast.get("/agent/sessions").json()["sessions"]
    assert [w["session_id"] for w in waiting] == [session_id]
    assert waiting[0]["last_message"] == "I want to talk to a real person"

    # While an agent owns it, the bot only acknowledges.
    held = chat(fast, "hello? anyone there?", session_id=session_id)["done"]
    assert held["tier"] == "handoff"

    reply = fast.post(
        f"/agent/sessions/{session_id}/reply", json={"message": "Hi, I'm Mei.", "agent": "mei"}
    )
    assert reply.status_code == 201, reply.text
    messages = fast.get(f"/sessions/{session_id}").json()["messages"]
    assert messages[-1]["content"] == "Hi, I'm Mei."
    assert messages[-1]["meta"] == {"tier": "agent", "agent": "mei"}

    assert fast.post(f"/agent/sessions/{session_id}/release").status_code == 204
    assert fast.get("/agent/sessions").json()["sessions"] == []
    assert fast.get(f"/sessions/{session_id}").json()["state"] == "bot"
    back = chat(fast, "hi", session_id=session_id)["done"]
    assert back["tier"] == "smalltalk"


def test_the_bot_failing_twice_hands_off(fast: TestClient) -> None:
    first = chat(fast, "Is the oak dining table available in walnut?")["done"]
    session_id = first["session_id"]
    settle(fast, session_id)
    second = chat(fast, "that didn't help", session_id=session_id)["done"]
    assert second["tier"] != "handoff"
    settle(fast, session_id)
    third = chat(fast, "that's not what I asked", session_id=session_id)["done"]
    assert third["tier"] == "handoff"


def test_agent_api_errors(fast: TestClient) -> None:
    assert_envelope(fast.post("/agent/sessions/nope/reply", json={"message": "x"}), 404)
    bot = chat(fast, "hi")["done"]
    settle(fast, bot["session_id"])
    not_waiting = fast.post(f"/agent/sessions/{bot['session_id']}/reply", json={"message": "x"})
    assert_envelope(not_waiting, 409, code="session_conflict")
    assert_envelope(fast.post(f"/agent/sessions/{bot['session_id']}/reply", json={}), 400)


def test_kb_admin_endpoints(fast: TestClient) -> None:
    listed = fast.get("/kb").json()
    assert listed["count"] == len(demo.entries())
    hits = fast.get("/kb/search", params={"q": "怎么退货", "k": 3}).json()["hits"]
    assert len(hits) == 3
    assert hits[0]["lang"] == "zh"
    assert hits[0]["score"] >= hits[1]["score"]

    body = b"question,answer\nDo you have a showroom?,Yes: 12 Lumen Lane.\n"
    imported = fast.post("/kb/import", params={"filename": "more.csv"}, content=body)
    assert imported.status_code == 200, imported.text
    assert imported.json()["added"] == 1
    assert chat(fast, "Do you have a showroom?")["done"]["tier"] == "faq"


def test_a_kb_question_of_words_the_embedder_lacks_is_added_and_evicts(fast: TestClient) -> None:
    # Its vector is zero: it is near no cached answer, and must not fail the change.
    general = chat(fast, "Is there a car park near your office?")["done"]
    assert general["tier"] == "llm"
    settle(fast, general["session_id"])
    added = fast.post("/kb/entries", json={"question": "배송 언제 와요?", "answer": "2-4일."})
    assert added.status_code in (200, 201), added.text
    assert chat(fast, "배송 언제 와요?")["done"]["tier"] == "faq"  # word for word
    assert chat(fast, "Is there a car park near your office?")["done"]["tier"] == "cache"


@pytest.mark.parametrize(
    ("body", "filename", "words"),
    [
        (b"q,a\nx,y\n", "bad.csv", ["question", "answer"]),
        (b"", "empty.csv", ["empty"]),
        (b"question,answer\nA?,one\na?,two\n", "dup.csv", ["line 2", "line 3"]),
        (b"question,answer\nok,\xff\xfe\n", "enc.csv", ["line 2"]),
    ],
)
def test_kb_import_errors_name_the_line_and_import_nothing(
    fast: TestClient, body: bytes, filename: str, words: list[str]
) -> None:
    before = fast.get("/kb").json()["count"]
    error = assert_envelope(
        fast.post("/kb/import", params={"filename": filename}, content=body), 400
    )
    for word in words:
        assert word in error["message"], error["message"]
    assert fast.get("/kb").json()["count"] == before


def test_kb_api_errors(fast: TestClient) -> None:
    assert_envelope(fast.get("/kb/search"), 400)
    assert_envelope(fast.get("/kb/search", params={"q": "x", "k": "0"}), 400)
    assert_envelope(fast.post("/kb/import", content=b"question,answer\n"), 400)
    assert_envelope(fast.delete("/kb/entries/0123456789ab"), 404)
    assert_envelope(fast.get("/kb/entries/0123456789ab"), 404)
    assert_envelope(fast.post("/kb/entries", json={"question": "x"}), 400)


def test_every_tier_is_counted_in_the_metrics(fast: TestClient) -> None:
    chat(fast, demo_rows("en")[0]["question"])
    chat(fast, "hello")
    chat(fast, "where is LH-100002?")
    chat(fast, "Do you sell picnic blankets with a waterproof back?")
    metrics = fast.get("/metrics").text
    for tier in ("faq", "smalltalk", "tool", "llm"):
        assert f'kefu_answers_total{{tier="{tier}"}} 1.0' in metrics, tier


def test_with_the_fast_path_off_everything_goes_to_the_llm(
    client_factory: ClientFactory,
) -> None:
    with client_factory(fast_path=False) as client:
        done = chat(client, demo_rows("en")[0]["question"])["done"]
        assert done["tier"] == "llm"
        assert_envelope(client.get("/kb"), 404)


@pytest.mark.anyio
async def test_an_agent_reply_reaches_the_customers_open_stream(settings_factory: Any) -> None:
    app = make_app(settings_factory(fast_path=True), FakeEngine())
    async with serve(app) as client:
        response = await client.post("/chat", json={"message": "转人工"})
        done = parse_sse(response.text)[-1].json()
        assert done["tier"] == "handoff"
        session_id = done["session_id"]
        runtime: Runtime = app.state.runtime
        async with runtime.events.subscribe(session_id) as queue:
            sent = await client.post(
                f"/agent/sessions/{session_id}/reply", json={"message": "您好，我是小王"}
            )
            assert sent.json()["delivered"] == 1
            event = await asyncio.wait_for(queue.get(), 5)
        assert event.name == "agent"
        assert event.data["text"] == "您好，我是小王"


def test_a_kb_question_word_for_word_skips_the_search(fast: TestClient) -> None:
    entry = demo_rows("en")[0]
    exact = chat(fast, "  " + entry["question"].upper() + " ")["done"]
    assert exact["tier"] == "faq"
    assert exact["route"]["reason"] == "the question, word for word"
    assert exact["reply"] == entry["answer"]
    searched = chat(fast, "how many days until my delivery arrives?")["done"]
    assert searched["route"]["reason"] != "the question, word for word"


def test_an_order_backend_that_is_down_gets_a_plain_answer(client_factory: ClientFactory) -> None:
    # Nothing listens on port 9 of this host: the shop's API refuses the connection.
    backend = {"order_backend": "http", "order_api_url": "http://127.0.0.1:9/orders/{order_id}"}
    with client_factory(fast_path=True, **backend) as client:
        done = chat(client, "where is LH-100001?")["done"]
        assert done["tier"] == "tool"
        assert "can't look up order LH-100001" in done["reply"]


def test_a_large_kb_change_evicts_every_cached_answer(fast: TestClient) -> None:
    question = "Do you sell replacement shades for paper lanterns?"
    first = chat(fast, question)["done"]
    settle(fast, first["session_id"])
    assert chat(fast, question)["done"]["tier"] == "cache"
    rows = "".join(
        f"Is model Z{n} waterproof?,No: model Z{n} is for indoor use.\n" for n in range(17)
    )
    imported = fast.post(
        "/kb/import", params={"filename": "models.csv"}, content=f"question,answer\n{rows}".encode()
    )
    assert imported.json()["added"] == 17
    # Unrelated entries, but too many to compare one by one: the cache starts over.
    assert chat(fast, question)["done"]["tier"] == "llm"


def test_a_message_of_words_the_embedder_lacks_goes_to_the_llm(fast: TestClient) -> None:
    message = "배송 언제 와요?"  # Korean: no word of the static table, a zero vector
    first = chat(fast, message)["done"]
    assert first["tier"] == "llm"
    settle(fast, first["session_id"])
    again = chat(fast, message)["done"]
    assert again["tier"] == "llm"  # nothing cached that could never be matched


def test_a_declined_question_is_kept_for_the_knowledge_base(
    client_factory: ClientFactory, tmp_path: Path
) -> None:
    with client_factory(fast_path=True) as client:
        declined = chat(client, "can i send back the concert tickets i bought last week?")["done"]
        assert declined["tier"] == "llm"
        answered = chat(client, "How long does delivery take?")["done"]
        assert answered["tier"] == "faq"
    log = MissLog(tmp_path / "data" / MISSES_FILE)  # the server wrote it as it closed
    try:
        [miss] = log.top()
    finally:
        log.close()
    assert miss.message == "can i send back the concert tickets i bought last week?"
    assert miss.reason == declined["route"]["reason"]


def test_the_llm_reads_one_passage_per_answer(
    client_factory: ClientFactory, fake_engine: FakeEngine
) -> None:
    # Two of the three best hits are phrasings of the delivery-time answer.
    with client_factory(fast_path=True, kb_passages=3) as client:
        message = "how long does delivery to my gym take, my trainer is waiting"
        done = chat(client, message)["done"]
    assert done["tier"] == "llm"
    prompt = "\n".join(m.content for m in fake_engine.requests[-1].messages)
    answers = {entry.answer for entry in demo.entries()}
    delivery = next(
        e.answer for e in demo.entries() if e.question == "How long does delivery take?"
    )
    assert prompt.count(delivery) == 1
    assert sum(answer in prompt for answer in answers) == 3


def read_ahead_request(engine: FakeEngine, *, wait: float = 5.0) -> GenerationRequest | None:
    """The engine's read-ahead request, once it came (it runs after the reply went out)."""
    deadline = time.monotonic() + wait
    while True:
        found = [r for r in engine.requests if r.request_id == READ_AHEAD]
        if found or time.monotonic() > deadline:
            return found[-1] if found else None
        time.sleep(0.02)


def test_a_turn_the_fast_path_answered_is_read_ahead_for_the_next_model_turn(
    client_factory: ClientFactory, fake_engine: FakeEngine
) -> None:
    # Its turns never passed through the engine: the first model turn would read them all.
    entry = demo_rows("en")[3]
    with client_factory(fast_path=True, kb_passages=3) as client:
        first = chat(client, entry["question"])
        assert first["done"]["tier"] == "faq"
        session = first["done"]["session_id"]
        ahead = read_ahead_request(fake_engine)
        assert ahead is not None
        assert ahead.background  # only in steps with no customer
        assert ahead.sampling.max_tokens == 1
        assert ahead.routing_key == session
        assert [(m.role, m.content) for m in ahead.messages[1:]] == [
            ("user", entry["question"]),
            ("assistant", entry["answer"]),
        ]
        second = chat(
            client,
            "how long does delivery to my gym take, my trainer is waiting",
            session_id=session,
        )
        assert second["done"]["tier"] == "llm"
    prompt = fake_engine.requests[-1].messages
    assert prompt[: len(ahead.messages)] == ahead.messages  # all of it reused


def test_no_read_ahead_on_an_engine_that_would_serve_it_as_a_request(
    client_factory: ClientFactory, fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_engine, "background_in_idle_steps", False)  # as a remote one
    with client_factory(fast_path=True) as client:
        assert chat(client, demo_rows("en")[3]["question"])["done"]["tier"] == "faq"
        assert read_ahead_request(fake_engine, wait=0.5) is None
    assert fake_engine.requests == []


def test_the_next_turn_repeats_the_last_prompt_and_only_adds_to_it(
    client_factory: ClientFactory, fake_engine: FakeEngine
) -> None:
    # The passages travel with their message and stay with it, so a conversation's prompt
    # only grows between folds and the engine reads just the new message and its entries.
    with client_factory(fast_path=True, kb_passages=3) as client:
        first = chat(client, "how long does delivery to my gym take, my trainer is waiting")
        session = first["done"]["session_id"]
        assert first["done"]["tier"] == "llm"
        settle(client, session)
        second = chat(client, "and can i send back the gym shoes after a week?", session_id=session)
        assert second["done"]["tier"] == "llm"
        stored = client.get(f"/sessions/{session}").json()["messages"]
    before, after = fake_engine.requests[-2].messages, fake_engine.requests[-1].messages
    assert after[: len(before)] == before
    assert after[len(before)].content == first["done"]["reply"]
    # The passages as a system message just before the customer's words (the fake engine
    # takes one between turns, as the bundled model's template does).
    assert after[-2].role == "system"
    assert after[-2].content.count("Q: ") == 3
    assert after[-1] == ChatMessage("user", "and can i send back the gym shoes after a week?")
    assert "Q: " not in after[0].content  # the system prompt holds no entries
    # The turn keeps what was sent with its message; what a customer reads is the message.
    assert stored[0]["content"] == "how long does delivery to my gym take, my trainer is waiting"
    assert [len(entry) for entry in stored[1]["meta"]["knowledge"]] == [2, 2, 2]


@pytest.mark.anyio
async def test_the_refresh_round_reads_an_import_ahead(settings_factory: Any) -> None:
    app = make_app(settings_factory(fast_path=True), FakeEngine())
    async with serve(app) as client:
        runtime: Runtime = app.state.runtime
        assert runtime.fast_path is not None
        fast_path = runtime.fast_path
        body = b"question,answer\nDo you have a showroom?,Yes: 12 Lumen Lane.\n"
        imported = await client.post("/kb/import", params={"filename": "more.csv"}, content=body)
        assert imported.status_code == 200, imported.text
        # Nothing but the server's own refresh round reads the new texts.
        deadline = time.monotonic() + 10
        while await fast_path.read_kb(lambda kb: kb.unread(1)):
            assert time.monotonic() < deadline, "the imported entry was not read ahead"
            await asyncio.sleep(0.05)


def test_ready_shows_what_serves(fast: TestClient) -> None:
    # The demo ships its model at the default precision, fitted on the demo's own labels.
    decision = fast.get("/ready").json()["knowledge_base"]["decision"]
    assert decision["state"] == "fitted"
    assert decision["target_precision"] == 0.95
    assert decision["decided_by"] == "labels"
    assert decision["precision_lower_bound"] >= 0.95
    assert decision["labels"]["phrasing"] > 0
    assert decision["at_threshold"]["labelled"] >= decision["at_threshold"]["right"] > 0
    assert fast.get("/ready").json()["knowledge_base"]["judge"] is None  # none configured
