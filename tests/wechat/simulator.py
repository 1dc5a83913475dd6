"""WeChat's side of the channels, for the tests and benchmarks/wechat.py.

``OfficialAccountSimulator`` is WeChat's server calling a 公众号's URL: XML signed with the
account's token (and in 安全模式 encrypted), built and read with wechatpy's own crypto; a
request that gets no reply within its clock (5 s) is tried again, three tries in all,
then the user would see "该公众号暂时无法提供服务". ``WeChatPlatform`` stands in for
WeChat's APIs (the access token, customer-service messages, 微信客服's sync_msg and
send_msg) and records what kefu sends. ``serve_in_thread`` runs an ASGI app on a free
port, so the simulator's clock is a real socket timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import uvicorn
import xmltodict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from wechatpy.crypto import WeChatCrypto
from wechatpy.enterprise.crypto import PrpCrypto
from wechatpy.enterprise.crypto import WeChatCrypto as WeComCrypto
from wechatpy.utils import WeChatSigner

from tests.e2e.support import free_port

WECHAT_CLOCK = 5.0  # seconds WeChat waits for a reply before it tries again
WECHAT_TRIES = 3


def signed_query(token: str, **extra: str) -> dict[str, str]:
    timestamp, nonce = str(int(time.time())), secrets.token_hex(5)
    signer = WeChatSigner()
    signer.add_data(token, timestamp, nonce)
    return {"signature": signer.signature, "timestamp": timestamp, "nonce": nonce, **extra}


@dataclass
class Try:
    status: int | None  # None: no reply within the clock
    seconds: float
    body: str


@dataclass
class Delivery:
    tries: list[Try]
    reply: str | None  # the passive reply's text, decrypted; None for "success" / nothing

    @property
    def failed(self) -> bool:
        """Every try went unanswered: WeChat shows the user its error."""
        return all(t.status != 200 for t in self.tries)


class OfficialAccountSimulator:
    def __init__(
        self,
        url: str | list[str],
        *,
        token: str,
        app_id: str,
        aes_key: str | None = None,
        account: str = "gh_shop",
        clock: float = WECHAT_CLOCK,
        tries: int = WECHAT_TRIES,
    ) -> None:
        # Several URLs: replicas behind a balancer that sends each try to the next one.
        self.urls = [url] if isinstance(url, str) else list(url)
        self.url = self.urls[0]
        self.token = token
        self.account = account
        self.clock = clock
        self.tries = tries
        self.crypto = WeChatCrypto(token, aes_key, app_id) if aes_key else None
        self._ids = itertools.count(int(time.time() * 1000) * 1000)

    def next_id(self) -> str:
        return str(next(self._ids))

    def text(self, openid: str, content: str, msg_id: str | None = None) -> str:
        return self._xml(openid, "text", Content=content, MsgId=msg_id or self.next_id())

    def image(self, openid: str) -> str:
        return self._xml(
            openid, "image", PicUrl="http://example.invalid/a.jpg", MediaId="m1",
            MsgId=self.next_id(),
        )  # fmt: skip

    def event(self, openid: str, event: str = "subscribe") -> str:
        return self._xml(openid, "event", Event=event)

    def _xml(self, openid: str, msg_type: str, **fields: str) -> str:
        body = {
            "ToUserName": self.account,
            "FromUserName": openid,
            "CreateTime": str(int(time.time())),
            "MsgType": msg_type,
            **fields,
        }
        return str(xmltodict.unparse({"xml": body}, full_document=False))

    def verify_url(self) -> httpx.Response:
        query = signed_query(self.token, echostr="echo-1234")
        return httpx.get(f"{self.url}?{urlencode(query)}", timeout=self.clock)

    async def deliver(self, client: httpx.AsyncClient, xml: str, first: int = 0) -> Delivery:
        """POST as WeChat does: a fresh signature each try, ``tries`` tries of ``clock`` s;
        try ``i`` goes to ``urls[(first + i) % len(urls)]``."""
        tries: list[Try] = []
        for attempt in range(self.tries):
            url = self.urls[(first + attempt) % len(self.urls)]
            query = signed_query(self.token)
            body = xml
            if self.crypto is not None:
                sealed = self.crypto.encrypt_message(xml, query["nonce"], query["timestamp"])
                outer = xmltodict.parse(sealed)["xml"]
                query |= {"encrypt_type": "aes", "msg_signature": outer["MsgSignature"]}
                body = sealed
            started = time.perf_counter()
            try:
                async with asyncio.timeout(self.clock):
                    response = await client.post(
                        f"{url}?{urlencode(query)}",
                        content=body.encode(),
                        headers={"content-type": "text/xml"},
                    )
            except (TimeoutError, httpx.HTTPError):
                # No reply in time, or the connection broke: WeChat tries again.
                tries.append(Try(None, time.perf_counter() - started, ""))
                continue
            tries.append(Try(response.status_code, time.perf_counter() - started, response.text))
            if response.status_code == 200:
                return Delivery(tries, self.read_reply(response.text, query))
        return Delivery(tries, None)

    def read_reply(self, text: str, query: dict[str, str]) -> str | None:
        if not text or text == "success":
            return None
        fields = xmltodict.parse(text)["xml"]
        if "Encrypt" in fields:
            assert self.crypto is not None, "an encrypted reply to a plaintext request"
            plain = self.crypto.decrypt_message(
                text, fields["MsgSignature"], fields["TimeStamp"], fields["Nonce"]
            )
            fields = xmltodict.parse(plain)["xml"]
        assert fields["MsgType"] == "text", fields
        assert fields["ToUserName"]
        assert fields["FromUserName"] == self.account
        return str(fields["Content"])


class CustomerServiceSimulator:
    """WeCom's side of 微信客服: the encrypted callback that says messages are waiting."""

    def __init__(self, url: str, *, token: str, aes_key: str, corp_id: str) -> None:
        self.url = url
        self.token = token
        self.corp_id = corp_id
        self.crypto = WeComCrypto(token, aes_key, corp_id)

    def _query(self, encrypted: str) -> dict[str, str]:
        timestamp, nonce = str(int(time.time())), secrets.token_hex(5)
        signer = WeChatSigner()
        signer.add_data(self.token, timestamp, nonce, encrypted)
        return {"msg_signature": signer.signature, "timestamp": timestamp, "nonce": nonce}

    def verify_url(self) -> httpx.Response:
        # The echostr WeCom sends is the ciphertext of a random string.
        echostr = PrpCrypto(self.crypto.key).encrypt("echo-5678", self.corp_id).decode()
        query = self._query(echostr) | {"echostr": echostr}
        return httpx.get(f"{self.url}?{urlencode(query)}", timeout=5.0)

    def callback(self, open_kfid: str, token: str = "sync-token") -> httpx.Response:
        xml = xmltodict.unparse(
            {
                "xml": {
                    "ToUserName": self.corp_id,
                    "CreateTime": str(int(time.time())),
                    "MsgType": "event",
                    "Event": "kf_msg_or_event",
                    "Token": token,
                    "OpenKfId": open_kfid,
                }
            },
            full_document=False,
        )
        timestamp, nonce = str(int(time.time())), secrets.token_hex(5)
        sealed = self.crypto.encrypt_message(xml, nonce, timestamp)
        outer = xmltodict.parse(sealed)["xml"]
        query = {"msg_signature": outer["MsgSignature"], "timestamp": timestamp, "nonce": nonce}
        return httpx.post(f"{self.url}?{urlencode(query)}", content=sealed.encode(), timeout=5.0)


@dataclass
class Sent:
    to: str
    text: str
    at: float
    token: str
    msgid: str = ""
    kind: str = "text"


@dataclass
class WeChatPlatform:
    """The APIs' stand-in. Tokens live ``expires_in`` seconds; ``fail_sends`` sends fail
    with WeChat's "system busy" (-1) before the next one goes through."""

    app_id: str = "wx-test-app"
    secret: str = "test-secret"
    corp_id: str = "ww-test-corp"
    expires_in: int = 7200
    fail_sends: int = 0
    token_delay: float = 0.0
    sent: list[Sent] = field(default_factory=list)
    token_fetches: int = 0
    kf_messages: list[dict[str, Any]] = field(default_factory=list)
    sync_calls: int = 0
    _tokens: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/cgi-bin/token", self._token),
                Route("/cgi-bin/gettoken", self._token),
                Route("/cgi-bin/message/custom/send", self._custom_send, methods=["POST"]),
                Route("/cgi-bin/kf/sync_msg", self._sync_msg, methods=["POST"]),
                Route("/cgi-bin/kf/send_msg", self._kf_send, methods=["POST"]),
                Route("/cgi-bin/kf/send_msg_on_event", self._kf_event, methods=["POST"]),
            ]
        )

    def texts_to(self, user: str) -> list[str]:
        return [s.text for s in self.sent if s.to == user]

    async def _token(self, request: Request) -> JSONResponse:
        query = request.query_params
        app_id = query.get("appid") or query.get("corpid")
        secret = query.get("secret") or query.get("corpsecret")
        if app_id not in (self.app_id, self.corp_id) or secret != self.secret:
            return JSONResponse({"errcode": 40013, "errmsg": "invalid appid"})
        if self.token_delay:
            await asyncio.sleep(self.token_delay)
        with self._lock:
            self.token_fetches += 1
            token = f"token-{self.token_fetches}"
            self._tokens[token] = time.time() + self.expires_in
        return JSONResponse({"access_token": token, "expires_in": self.expires_in})

    def _check(self, request: Request) -> str | None:
        token = request.query_params.get("access_token", "")
        if self._tokens.get(token, 0) < time.time():
            return None
        return token

    def _busy(self) -> bool:
        with self._lock:
            if self.fail_sends > 0:
                self.fail_sends -= 1
                return True
        return False

    async def _custom_send(self, request: Request) -> JSONResponse:
        token = self._check(request)
        if token is None:
            return JSONResponse({"errcode": 40001, "errmsg": "invalid credential"})
        if self._busy():
            return JSONResponse({"errcode": -1, "errmsg": "system error"})
        body = await request.json()
        text = body["text"]["content"]
        assert len(text.encode()) <= 2048, "over WeChat's length limit"
        self.sent.append(Sent(body["touser"], text, time.time(), token))
        return JSONResponse({"errcode": 0, "errmsg": "ok"})

    async def _sync_msg(self, request: Request) -> JSONResponse:
        if self._check(request) is None:
            return JSONResponse({"errcode": 40001, "errmsg": "invalid credential"})
        body = await request.json()
        self.sync_calls += 1
        start = int(body.get("cursor") or 0)
        limit = int(body.get("limit") or 1000)
        page = self.kf_messages[start : start + limit]
        end = start + len(page)
        return JSONResponse(
            {
                "errcode": 0,
                "errmsg": "ok",
                "next_cursor": str(end),
                "has_more": int(end < len(self.kf_messages)),
                "msg_list": page,
            }
        )

    async def _kf_send(self, request: Request) -> JSONResponse:
        token = self._check(request)
        if token is None:
            return JSONResponse({"errcode": 40001, "errmsg": "invalid credential"})
        if self._busy():
            return JSONResponse({"errcode": -1, "errmsg": "system error"})
        body = await request.json()
        to = f"{body['open_kfid']}:{body['touser']}"
        self.sent.append(Sent(to, body["text"]["content"], time.time(), token, body["msgid"]))
        return JSONResponse({"errcode": 0, "errmsg": "ok", "msgid": body["msgid"]})

    async def _kf_event(self, request: Request) -> JSONResponse:
        token = self._check(request)
        if token is None:
            return JSONResponse({"errcode": 40001, "errmsg": "invalid credential"})
        body = await request.json()
        self.sent.append(
            Sent(body["code"], body["text"]["content"], time.time(), token, "", "welcome")
        )
        return JSONResponse({"errcode": 0, "errmsg": "ok"})


@contextmanager
def serve_in_thread(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 in a thread of its own; yields its base URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
