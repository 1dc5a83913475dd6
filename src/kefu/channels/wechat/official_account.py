"""The Official Account (公众号): its requests read into ``Inbound``, its replies written
as WeChat's XML, late answers and agents' replies sent as customer-service messages."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from wechatpy.replies import TextReply

from kefu.channels.wechat.api import WeChatApi
from kefu.channels.wechat.desk import Desk
from kefu.channels.wechat.envelope import OfficialAccountEnvelope
from kefu.channels.wechat.inbound import Inbound, Kind
from kefu.errors import InvalidRequest

# What WeChat takes as "received, no reply": it neither retries nor shows the user an error.
SUCCESS = "success"
CHANNEL = "mp"
GREETED_EVENTS = {"subscribe"}


def _field(fields: Mapping[str, Any], name: str) -> str:
    value = fields.get(name)
    return value.strip() if isinstance(value, str) else ""


def read_message(fields: Mapping[str, Any]) -> Inbound | None:
    """The message, or None for what needs no answer (unsubscribe, menu views, …)."""
    user, account = _field(fields, "FromUserName"), _field(fields, "ToUserName")
    msg_type = _field(fields, "MsgType").lower()
    if not user or not account or not msg_type:
        raise InvalidRequest("the message lacks FromUserName, ToUserName or MsgType")
    try:
        created = int(_field(fields, "CreateTime") or 0)
    except ValueError:
        raise InvalidRequest("CreateTime is not a number") from None
    if msg_type == "event":
        event = _field(fields, "Event").lower()
        if event not in GREETED_EVENTS:
            return None
        # Events have no MsgId: WeChat advises sender + CreateTime for their retries.
        return Inbound(f"{CHANNEL}:event:{user}:{created}", user, account, "greet", "", created)
    msg_id = _field(fields, "MsgId")
    if not msg_id:
        raise InvalidRequest("the message has no MsgId")
    kind: Kind = "other"
    text = ""
    if msg_type == "text":
        kind, text = "text", _field(fields, "Content")
    elif msg_type == "voice" and _field(fields, "Recognition"):
        # Speech recognition switched on in the account's console: WeChat sends the words.
        kind, text = "text", _field(fields, "Recognition")
    if kind == "text" and not text:
        kind = "other"
    return Inbound(f"{CHANNEL}:{msg_id}", user, account, kind, text, created)


def _cdata_safe(text: str) -> str:
    """``]]>`` would end wechatpy's CDATA section early: split it across two."""
    return text.replace("]]>", "]]]]><![CDATA[>")


def passive_reply(message: Inbound, text: str) -> str:
    reply = TextReply(
        source=message.account, target=message.user, content=_cdata_safe(text), time=time.time()
    )
    return str(reply.render())


class OfficialAccount:
    """The logic of ``/wechat/mp``: what to answer each of WeChat's requests."""

    def __init__(
        self, envelope: OfficialAccountEnvelope, desk: Desk, api: WeChatApi, budget: float
    ) -> None:
        self.envelope = envelope
        self.desk = desk
        self.api = api
        self.budget = budget

    def verify_url(self, query: Mapping[str, str]) -> str:
        return self.envelope.echo(query)

    async def handle(self, query: Mapping[str, str], body: bytes, received: float) -> str:
        """The body of the reply to WeChat: XML (encrypted if the request was), or
        ``success``. ``received``: when the request arrived (perf_counter), for the budget."""
        fields, encrypted = self.envelope.open(query, body)
        message = read_message(fields)
        if message is None:
            return SUCCESS
        answer = await self.desk.receive(message, deadline=received + self.budget)
        if answer is None:
            return SUCCESS
        return self.envelope.seal(passive_reply(message, answer), encrypted)


class CustomerServiceMessages:
    """The outbox of the 公众号: customer-service messages (客服消息), allowed within 48
    hours of the user's last message. The API takes no message id, so a send retried
    after an unclear failure (no answer from WeChat) may arrive twice."""

    def __init__(self, api: WeChatApi) -> None:
        self.api = api

    async def send(self, user: str, text: str, *, key: str, part: int, code: str = "") -> None:
        body = {"touser": user, "msgtype": "text", "text": {"content": text}}
        await self.api.call("/cgi-bin/message/custom/send", body, what="customer-service message")
