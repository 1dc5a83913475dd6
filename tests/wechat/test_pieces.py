"""Pure pieces: the split at WeChat's length, the envelopes against wechatpy's crypto,
the messages read from WeChat's fields."""

from __future__ import annotations

import time

import pytest
import xmltodict
from wechatpy.crypto import WeChatCrypto

from kefu.channels.wechat.customer_service import read_kf_message
from kefu.channels.wechat.envelope import OfficialAccountEnvelope
from kefu.channels.wechat.official_account import passive_reply, read_message
from kefu.channels.wechat.split import split_text
from kefu.errors import InvalidRequest, Unauthenticated
from tests.wechat.conftest import aes_key
from tests.wechat.simulator import signed_query


def test_short_text_is_one_part() -> None:
    assert split_text("  你好。 ") == ["你好。"]
    assert split_text("") == []


@pytest.mark.parametrize(
    "text",
    [
        "这是一句话。" * 500,
        "This is one sentence. " * 300,
        "“好的。”他说，然后走了！" * 300,
        "x" * 5000,
        "很长的一句没有句号，只有逗号，" * 300,
        "emoji 😀 " * 900,
    ],
)
def test_long_text_is_cut_under_2048_bytes_at_sentence_ends(text: str) -> None:
    parts = split_text(text)
    assert len(parts) >= 2
    assert all(len(p.encode("utf-8")) <= 2048 for p in parts)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")
    if "。" in text or ". " in text:
        assert all(p.endswith(("。", ".", "！", "”")) for p in parts[:-1])


def test_an_encrypted_message_opens_and_the_reply_is_sealed() -> None:
    key = aes_key()
    envelope = OfficialAccountEnvelope("tok", key, "wxapp")
    wechat = WeChatCrypto("tok", key, "wxapp")
    xml = (
        "<xml><ToUserName>gh</ToUserName><FromUserName>o-1</FromUserName>"
        f"<CreateTime>{int(time.time())}</CreateTime><MsgType>text</MsgType>"
        "<Content>a ]]> b</Content><MsgId>42</MsgId></xml>"
    ).replace("a ]]> b", "<![CDATA[a ]]]]><![CDATA[> b]]>")
    query = signed_query("tok")
    sealed = wechat.encrypt_message(xml, query["nonce"], query["timestamp"])
    query |= {
        "encrypt_type": "aes",
        "msg_signature": xmltodict.parse(sealed)["xml"]["MsgSignature"],
    }
    fields, encrypted = envelope.open(query, sealed.encode())
    message = read_message(fields)
    assert encrypted
    assert message is not None
    assert (message.key, message.user, message.text) == ("mp:42", "o-1", "a ]]> b")
    reply = envelope.seal(passive_reply(message, "答 ]]> 案"), encrypted=True)
    outer = xmltodict.parse(reply)["xml"]
    plain = wechat.decrypt_message(reply, outer["MsgSignature"], outer["TimeStamp"], outer["Nonce"])
    assert xmltodict.parse(plain)["xml"]["Content"] == "答 ]]> 案"
    tampered = dict(query, msg_signature="0" * 40)
    with pytest.raises(Unauthenticated):
        envelope.open(tampered, sealed.encode())


def test_what_is_not_wechats_xml_is_a_clear_400() -> None:
    envelope = OfficialAccountEnvelope("tok", None, "wxapp")
    for body in (b"", b"{}", b"<html/>", b"<xml><a>1</a></xml>"):
        with pytest.raises(InvalidRequest):
            read_message(envelope.open(signed_query("tok"), body)[0])
    encrypted = signed_query("tok", encrypt_type="aes", msg_signature="x")
    with pytest.raises(InvalidRequest, match="EncodingAESKey"):
        envelope.open(encrypted, b"<xml><Encrypt>abc</Encrypt></xml>")
    entity_bomb = b'<!DOCTYPE x [<!ENTITY a "aaaa">]><xml><Content>&a;</Content></xml>'
    with pytest.raises(InvalidRequest):
        envelope.open(signed_query("tok"), entity_bomb)


def test_messages_are_read_by_kind() -> None:
    base = {"ToUserName": "gh", "FromUserName": "o-1", "CreateTime": "100"}
    voice = read_message({**base, "MsgType": "voice", "MsgId": "7", "Recognition": "查订单"})
    assert voice is not None
    assert (voice.kind, voice.text) == ("text", "查订单")
    follow = read_message({**base, "MsgType": "event", "Event": "subscribe"})
    assert follow is not None
    assert (follow.kind, follow.key) == ("greet", "mp:event:o-1:100")
    assert read_message({**base, "MsgType": "event", "Event": "VIEW"}) is None
    kf = read_kf_message(
        {
            "msgid": "m1",
            "open_kfid": "wk1",
            "external_userid": "wm1",
            "send_time": 100,
            "origin": 3,
            "msgtype": "text",
            "text": {"content": "你好"},
        },
        "corp",
    )
    assert kf is not None
    assert (kf.key, kf.user, kf.text) == ("kf:m1", "wk1:wm1", "你好")
    servicer = {"msgid": "m2", "origin": 5, "msgtype": "text", "text": {"content": "hi"}}
    assert read_kf_message(servicer, "corp") is None
