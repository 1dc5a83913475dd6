"""/wechat/mp against the simulator: WeChat's signed (and encrypted) XML, its clock and its
tries; the stand-in records every customer-service message kefu sends."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlencode

import httpx
import pytest

from kefu.channels.wechat.answers import session_name
from kefu.engine.fake import FakeEngine
from tests.e2e.support import wait_for
from tests.wechat.conftest import APP_ID, TOKEN, KefuFactory
from tests.wechat.simulator import signed_query

pytestmark = pytest.mark.anyio


def test_the_url_check_echoes_a_signed_echostr(kefu_factory: KefuFactory) -> None:
    with kefu_factory() as kefu:
        ok = kefu.account().verify_url()
        assert ok.status_code == 200
        assert ok.text == "echo-1234"
        forged = signed_query("another-token", echostr="x")
        bad = httpx.get(f"{kefu.url}/wechat/mp?{urlencode(forged)}")
        assert bad.status_code == 401
        assert bad.json()["error"]["code"] == "unauthenticated"


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "aes"])
async def test_a_quick_answer_goes_back_in_the_reply(
    kefu_factory: KefuFactory, encrypted: bool
) -> None:
    with kefu_factory() as kefu:
        account = kefu.account(encrypted=encrypted)
        async with httpx.AsyncClient() as client:
            delivery = await account.deliver(client, account.text("o-user-1", "你好 hello"))
        assert len(delivery.tries) == 1
        assert delivery.reply == "fake reply to: 你好 hello"
        if encrypted:
            assert "<Encrypt>" in delivery.tries[0].body
        await asyncio.sleep(0.3)
        assert kefu.platform.sent == []  # nothing also went through the API


async def test_a_slow_answer_says_success_then_arrives_once_through_the_api(
    kefu_factory: KefuFactory,
) -> None:
    engine = FakeEngine(prefill_delay=2.0)
    with kefu_factory(engine=engine, wechat_reply_budget=0.5) as kefu:
        account = kefu.account(encrypted=True)
        async with httpx.AsyncClient() as client:
            delivery = await account.deliver(client, account.text("o-user-2", "slow question"))
        assert len(delivery.tries) == 1
        assert delivery.tries[0].body == "success"
        assert delivery.reply is None
        wait_for(lambda: kefu.platform.texts_to("o-user-2"), "the API's text", 10.0, 0.02)
        await asyncio.sleep(0.5)
        assert kefu.platform.texts_to("o-user-2") == ["fake reply to: slow question"]


async def test_a_retry_while_the_answer_is_made_takes_it_passively(
    kefu_factory: KefuFactory,
) -> None:
    """WeChat's clock runs out (here 1 s) before kefu's budget (here 1.5 s): the first
    try is dropped, the retry waits for the same answer and carries it; nothing is sent
    through the API and the engine answered once."""
    engine = FakeEngine(prefill_delay=1.6)
    with kefu_factory(engine=engine, wechat_reply_budget=1.5) as kefu:
        account = kefu.account(clock=1.0)
        async with httpx.AsyncClient() as client:
            delivery = await account.deliver(client, account.text("o-user-3", "retry me"))
        assert [t.status for t in delivery.tries] == [None, 200]
        assert delivery.reply == "fake reply to: retry me"
        await asyncio.sleep(1.0)
        assert kefu.platform.sent == []
        assert len(engine.requests) == 1


async def test_the_same_msgid_sent_again_is_answered_once(kefu_factory: KefuFactory) -> None:
    with kefu_factory() as kefu:
        account = kefu.account()
        xml = account.text("o-user-4", "once please", msg_id="777")
        async with httpx.AsyncClient() as client:
            first = await account.deliver(client, xml)
            again = await account.deliver(client, xml)
            session = session_name("wxmp", APP_ID, "o-user-4")
            stored = (await client.get(f"{kefu.url}/sessions/{session}")).json()
        assert first.reply == again.reply == "fake reply to: once please"
        assert len(kefu.engine.requests) == 1
        assert [m["content"] for m in stored["messages"]] == [
            "once please",
            "fake reply to: once please",
        ]
        assert stored["user_id"] == "o-user-4"


async def test_a_new_follower_is_greeted_and_other_messages_get_a_polite_text(
    kefu_factory: KefuFactory,
) -> None:
    with kefu_factory(fast_path=True, second_look=False) as kefu:
        account = kefu.account(encrypted=True)
        async with httpx.AsyncClient() as client:
            greeting = await account.deliver(client, account.event("o-user-5"))
            picture = await account.deliver(client, account.image("o-user-5"))
            left = await account.deliver(client, account.event("o-user-5", "unsubscribe"))
        assert greeting.reply is not None
        assert "欢迎关注流明家居" in greeting.reply
        assert "1. " in greeting.reply  # suggested questions from the knowledge base
        assert picture.reply is not None
        assert "文字" in picture.reply
        assert left.reply is None
        assert kefu.engine.requests == []


def test_bad_requests_are_refused_with_the_reason(kefu_factory: KefuFactory) -> None:
    with kefu_factory() as kefu:
        url = f"{kefu.url}/wechat/mp"
        query = signed_query(TOKEN)
        not_xml = httpx.post(f"{url}?{urlencode(query)}", content=b"{not xml")
        assert not_xml.status_code == 400
        assert not_xml.json()["error"]["type"] == "invalid_request_error"
        unsigned = httpx.post(url, content=b"<xml></xml>")
        assert unsigned.status_code == 400
        stale = signed_query(TOKEN)
        stale["timestamp"] = str(int(time.time()) - 86400)
        resigned = httpx.post(f"{url}?{urlencode(stale)}", content=b"<xml></xml>")
        assert resigned.status_code == 401


def test_the_api_document_describes_the_wechat_routes(kefu_factory: KefuFactory) -> None:
    with kefu_factory() as kefu:
        document = httpx.get(f"{kefu.url}/openapi.json").json()
    for path in ("/wechat/mp", "/wechat/kf"):
        assert set(document["paths"][path]) == {"get", "post"}
    assert "x-undeclared" not in str(document)


async def test_wechat_needs_no_api_key_where_everything_else_does(
    kefu_factory: KefuFactory,
) -> None:
    with kefu_factory(auth="keys") as kefu:
        account = kefu.account(encrypted=True)
        async with httpx.AsyncClient() as client:
            delivery = await account.deliver(client, account.text("o-keys", "hi there"))
            chat = await client.post(f"{kefu.url}/chat", json={"message": "hi"})
        assert delivery.reply == "fake reply to: hi there"
        assert chat.status_code == 401
