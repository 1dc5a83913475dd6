"""The WeChat user as a kefu session: a handoff and the agent's replies through the API,
answers over WeChat's length split, an engine that cannot answer, the per-user limit."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from kefu.channels.wechat.answers import TOO_FAST_TEXT, UNAVAILABLE_TEXT, session_name
from kefu.engine.fake import FakeEngine
from kefu.errors import EngineNotReady
from tests.wechat.conftest import APP_ID, KefuFactory

pytestmark = pytest.mark.anyio


async def eventually(check: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


async def test_a_handoff_reaches_the_console_and_the_agent_answers_through_the_api(
    kefu_factory: KefuFactory,
) -> None:
    with kefu_factory(fast_path=True, second_look=False) as kefu:
        account = kefu.account(encrypted=True)
        session = session_name("wxmp", APP_ID, "o-agent-1")
        async with httpx.AsyncClient(base_url=kefu.url) as client:
            handed = await account.deliver(client, account.text("o-agent-1", "转人工"))
            assert handed.reply is not None
            waiting = (await client.get("/agent/sessions")).json()["sessions"]
            assert [w["session_id"] for w in waiting] == [session]
            reply = await client.post(
                f"/agent/sessions/{session}/reply", json={"message": "您好，我是小美。"}
            )
            assert reply.status_code == 201
            assert reply.json()["delivered"] == 1
            # While the agent owns it, the bot only says the message arrived.
            later = await account.deliver(client, account.text("o-agent-1", "还在吗"))
        assert kefu.platform.texts_to("o-agent-1") == ["您好，我是小美。"]
        assert later.reply is not None
        assert "人工客服" in later.reply
        assert kefu.engine.requests == []


async def test_an_answer_over_2048_bytes_goes_out_in_sentences_in_order(
    kefu_factory: KefuFactory,
) -> None:
    engine = FakeEngine(reply_words=700, context_window=4096)  # "w0 … w699": about 4.6 kB
    with kefu_factory(engine=engine, max_tokens=800) as kefu:
        account = kefu.account()
        async with httpx.AsyncClient() as client:
            delivery = await account.deliver(client, account.text("o-long", "tell me all"))
        assert delivery.reply is None  # several messages: all through the API, in order
        await eventually(lambda: len(" ".join(kefu.platform.texts_to("o-long")).split()) >= 700)
        parts = kefu.platform.texts_to("o-long")
        assert len(parts) >= 2
        assert all(len(p.encode()) <= 2048 for p in parts)
        assert " ".join(parts).split() == [f"w{i}" for i in range(700)]


class DownEngine(FakeEngine):
    async def start(self) -> None:
        raise EngineNotReady("the model file is missing")


async def test_an_engine_that_cannot_answer_gives_a_clear_text_and_keeps_the_message(
    kefu_factory: KefuFactory,
) -> None:
    with kefu_factory(engine=DownEngine(), ready=False) as kefu:
        account = kefu.account()
        async with httpx.AsyncClient(base_url=kefu.url) as client:
            delivery = await account.deliver(client, account.text("o-down", "where is my order"))
            session = session_name("wxmp", APP_ID, "o-down")
            stored = (await client.get(f"/sessions/{session}")).json()
        assert delivery.reply == UNAVAILABLE_TEXT
        assert [m["content"] for m in stored["messages"]] == ["where is my order", UNAVAILABLE_TEXT]
        assert stored["messages"][1]["meta"]["error"] == "engine_not_ready"


async def test_each_user_has_a_rate_limit(kefu_factory: KefuFactory) -> None:
    with kefu_factory(rate_limit="2/60") as kefu:
        account = kefu.account()
        async with httpx.AsyncClient() as client:
            replies = [
                (await account.deliver(client, account.text("o-fast", f"q{i}"))).reply
                for i in range(3)
            ]
            other = await account.deliver(client, account.text("o-calm", "hello"))
        assert replies[:2] == ["fake reply to: q0", "fake reply to: q1"]
        assert replies[2] == TOO_FAST_TEXT
        assert other.reply == "fake reply to: hello"
