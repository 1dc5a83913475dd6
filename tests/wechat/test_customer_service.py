"""/wechat/kf (微信客服): the encrypted callback, the pull from sync_msg's cursor, the
answers sent with send_msg under ids derived from the messages, each message once."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.e2e.support import wait_for
from tests.wechat.conftest import KefuFactory


def kf_text(msgid: str, user: str, text: str) -> dict[str, object]:
    return {
        "msgid": msgid,
        "open_kfid": "wk-shop",
        "external_userid": user,
        "send_time": int(time.time()),
        "origin": 3,
        "msgtype": "text",
        "text": {"content": text},
    }


def test_the_callback_url_check_answers_the_decrypted_echostr(kefu_factory: KefuFactory) -> None:
    with kefu_factory() as kefu:
        checked = kefu.customer_service().verify_url()
        assert checked.status_code == 200
        assert checked.text == "echo-5678"
        unsigned = httpx.get(f"{kefu.url}/wechat/kf?echostr=abc")
        assert unsigned.status_code == 400


def test_messages_are_pulled_and_each_answered_once(kefu_factory: KefuFactory) -> None:
    with kefu_factory(fast_path=True, second_look=False) as kefu:
        platform = kefu.platform
        platform.kf_messages += [
            kf_text("m1", "wm-a", "zorb flim"),
            kf_text("m2", "wm-b", "quux blat"),
            {
                "msgid": "e1",
                "msgtype": "event",
                "origin": 4,
                "event": {
                    "event_type": "enter_session",
                    "open_kfid": "wk-shop",
                    "external_userid": "wm-c",
                    "welcome_code": "WELCOME-1",
                },
            },
            {**kf_text("m3", "wm-a", "ignored"), "origin": 5},  # the shop's own servicer
        ]
        service = kefu.customer_service()
        assert service.callback("wk-shop").text == "success"
        wait_for(lambda: len(platform.sent) >= 3, "three sends", 10.0, 0.02)
        # WeCom calls back again (it may, for the same messages): nothing is answered twice.
        platform.kf_messages += [
            kf_text("m4", "wm-b", "frob nitz"),
            kf_text("m1", "wm-a", "zorb flim"),
        ]
        assert service.callback("wk-shop").text == "success"
        wait_for(lambda: len(platform.sent) >= 4, "four sends", 10.0, 0.02)
        time.sleep(0.5)
        by_user = {s.to: s for s in platform.sent if s.kind == "text"}
        assert by_user["wk-shop:wm-a"].text == "fake reply to: zorb flim"
        assert platform.texts_to("wk-shop:wm-b") == [
            "fake reply to: quux blat",
            "fake reply to: frob nitz",
        ]
        welcome = [s for s in platform.sent if s.kind == "welcome"]
        assert len(welcome) == 1
        assert welcome[0].to == "WELCOME-1"
        assert "欢迎" in welcome[0].text
        assert len(platform.sent) == 4
        msgids = [s.msgid for s in platform.sent if s.kind == "text"]
        assert len(set(msgids)) == len(msgids) == 3
        assert platform.token_fetches == 1


@pytest.mark.parametrize("body", [b"", b"<xml/>", b"<xml><Encrypt>!!</Encrypt></xml>"])
def test_a_bad_callback_is_a_clear_error(kefu_factory: KefuFactory, body: bytes) -> None:
    with kefu_factory() as kefu:
        query = "msg_signature=x&timestamp=1&nonce=n"
        reply = httpx.post(f"{kefu.url}/wechat/kf?{query}", content=body)
        assert reply.status_code in (400, 401)
        assert reply.json()["error"]["message"]
