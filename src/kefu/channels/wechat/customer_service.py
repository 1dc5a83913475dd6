"""WeChat Customer Service (微信客服): a shop's customers write from WeChat (a link, a QR
code, a mini program, the shop's 公众号 menu) and kefu answers through WeCom's kf API.

Its callback carries no message, only news that there are some: kefu answers it
``success`` at once and pulls them with ``sync_msg`` from a cursor, one puller at a time
(a lease in Redis, a lock in process), saving the cursor after each page. Each message
goes through the same desk as the 公众号's, with no passive reply (微信客服 has none), so
a page pulled twice, a replica that dies mid-answer, a send cut short are handled the same
way. Answers go out with ``send_msg`` under an id derived from the message: WeChat drops a
resend with an id it has seen, so a send retried after an unclear failure is not doubled.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from kefu.channels.wechat.api import WeChatApi
from kefu.channels.wechat.desk import Desk
from kefu.channels.wechat.envelope import WeComEnvelope
from kefu.channels.wechat.inbound import Inbound, Kind
from kefu.errors import InvalidRequest, KefuError
from kefu.shared.client import RedisClient

log = logging.getLogger("kefu.wechat")

CHANNEL = "kf"
PULL_LEASE_SECONDS = 30.0
PULL_WAIT_SECONDS = 10.0
PAGE = 1000
CUSTOMER = 3  # sync_msg's origin of a message the customer wrote


class Cursors(Protocol):
    """Where each 微信客服 account's sync_msg cursor is kept, and who may pull."""

    async def read(self, open_kfid: str) -> str: ...

    async def write(self, open_kfid: str, cursor: str) -> None: ...

    async def lease(self, open_kfid: str) -> str | None: ...

    async def unlease(self, open_kfid: str, lease: str) -> None: ...


class LocalCursors:
    def __init__(self) -> None:
        self._cursors: dict[str, str] = {}
        self._pulling: set[str] = set()

    async def read(self, open_kfid: str) -> str:
        return self._cursors.get(open_kfid, "")

    async def write(self, open_kfid: str, cursor: str) -> None:
        self._cursors[open_kfid] = cursor

    async def lease(self, open_kfid: str) -> str | None:
        if open_kfid in self._pulling:
            return None
        self._pulling.add(open_kfid)
        return open_kfid

    async def unlease(self, open_kfid: str, lease: str) -> None:
        self._pulling.discard(open_kfid)


UNLEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisCursors:
    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self._unlease = client.redis.register_script(UNLEASE)

    async def read(self, open_kfid: str) -> str:
        raw = await self.client.call(
            "wechat.cursor", lambda r: r.get(f"kefu:wechat:kf:cursor:{open_kfid}")
        )
        return raw.decode() if isinstance(raw, bytes) else (raw or "")

    async def write(self, open_kfid: str, cursor: str) -> None:
        await self.client.call(
            "wechat.cursor", lambda r: r.set(f"kefu:wechat:kf:cursor:{open_kfid}", cursor)
        )

    async def lease(self, open_kfid: str) -> str | None:
        lease = uuid.uuid4().hex
        taken = await self.client.call(
            "wechat.cursor",
            lambda r: r.set(
                f"kefu:wechat:kf:pull:{open_kfid}",
                lease,
                nx=True,
                px=int(PULL_LEASE_SECONDS * 1000),
            ),
        )
        return lease if taken else None

    async def unlease(self, open_kfid: str, lease: str) -> None:
        key = f"kefu:wechat:kf:pull:{open_kfid}"
        await self.client.call("wechat.cursor", lambda r: self._unlease(keys=[key], args=[lease]))


def read_kf_message(item: Mapping[str, Any], corp_id: str) -> Inbound | None:
    """A sync_msg item as the desk reads it; None for what needs no answer (a human
    servicer's own message, system events other than a customer arriving)."""
    msgid = str(item.get("msgid") or "")
    msgtype = str(item.get("msgtype") or "")
    created = int(item.get("send_time") or 0)
    if msgtype == "event":
        event = item.get("event") or {}
        if not isinstance(event, dict) or event.get("event_type") != "enter_session":
            return None
        user = f"{event.get('open_kfid', '')}:{event.get('external_userid', '')}"
        code = str(event.get("welcome_code") or "")
        return Inbound(f"{CHANNEL}:{msgid}", user, corp_id, "greet", "", created, code)
    if item.get("origin") != CUSTOMER or not msgid:
        return None
    user = f"{item.get('open_kfid', '')}:{item.get('external_userid', '')}"
    text = ""
    if msgtype == "text" and isinstance(item.get("text"), dict):
        text = str(item["text"].get("content") or "").strip()
    kind: Kind = "text" if text else "other"
    return Inbound(f"{CHANNEL}:{msgid}", user, corp_id, kind, text, created)


class KfOutbox:
    def __init__(self, api: WeChatApi) -> None:
        self.api = api

    async def send(self, user: str, text: str, *, key: str, part: int, code: str = "") -> None:
        open_kfid, _, external_userid = user.partition(":")
        content = {"msgtype": "text", "text": {"content": text}}
        if code:  # a welcome: 20 s from the customer's arrival, once, by the event's code
            await self.api.call(
                "/cgi-bin/kf/send_msg_on_event", {"code": code, **content}, what="welcome"
            )
            return
        msgid = hashlib.sha256(f"{key}#{part}".encode()).hexdigest()[:32]
        body = {"touser": external_userid, "open_kfid": open_kfid, "msgid": msgid, **content}
        await self.api.call("/cgi-bin/kf/send_msg", body, what="微信客服 message")


class CustomerService:
    """The logic of ``/wechat/kf``."""

    def __init__(
        self,
        envelope: WeComEnvelope,
        desk: Desk,
        api: WeChatApi,
        cursors: Cursors,
        corp_id: str,
    ) -> None:
        self.envelope = envelope
        self.desk = desk
        self.api = api
        self.cursors = cursors
        self.corp_id = corp_id
        self._pulls: set[asyncio.Task[int]] = set()

    def verify_url(self, query: Mapping[str, str]) -> str:
        return self.envelope.echo(query)

    def handle(self, query: Mapping[str, str], body: bytes) -> str:
        """Reply ``success`` at once; the pull runs after (a callback is retried at 5 s)."""
        fields = self.envelope.open(query, body)
        event = str(fields.get("Event") or "")
        if event != "kf_msg_or_event":
            return "success"
        open_kfid = str(fields.get("OpenKfId") or "")
        if not open_kfid:
            raise InvalidRequest("the kf_msg_or_event callback has no OpenKfId")
        token = str(fields.get("Token") or "")
        task = self.desk.runtime.spawn(self.pull(open_kfid, token))
        self._pulls.add(task)
        task.add_done_callback(self._pulls.discard)
        return "success"

    async def pull(self, open_kfid: str, token: str) -> int:
        """Pull and hand over every new message of the account; how many there were."""
        deadline = time.monotonic() + PULL_WAIT_SECONDS
        while (lease := await self.cursors.lease(open_kfid)) is None:
            if time.monotonic() > deadline:
                log.warning("微信客服 %s: another replica's pull holds the lease", open_kfid)
                return 0
            await asyncio.sleep(0.05)
        count = 0
        try:
            cursor = await self.cursors.read(open_kfid)
            while True:
                body = {"cursor": cursor, "token": token, "limit": PAGE, "open_kfid": open_kfid}
                page = await self.api.call("/cgi-bin/kf/sync_msg", body, what="sync_msg")
                for item in page.get("msg_list") or []:
                    message = (
                        read_kf_message(item, self.corp_id) if isinstance(item, dict) else None
                    )
                    if message is not None:
                        # Claimed in the ledger before the cursor moves past it.
                        await self.desk.receive(message, deadline=None)
                        count += 1
                cursor = str(page.get("next_cursor") or cursor)
                await self.cursors.write(open_kfid, cursor)
                if not page.get("has_more"):
                    return count
        except KefuError as exc:
            log.warning("微信客服 %s: pulling messages failed: %s", open_kfid, exc.message)
            return count
        finally:
            await self.cursors.unlease(open_kfid, lease)

    async def close(self) -> None:
        for task in list(self._pulls):
            task.cancel()
        await asyncio.gather(*self._pulls, return_exceptions=True)
