"""WeChat's HTTP APIs as the channels call them: the access token, the Official Account's
customer-service message (客服消息), and 微信客服's sync_msg / send_msg.

httpx, async, one client per channel (wechatpy's clients are synchronous ``requests``,
which would stop the event loop for every call). The base URL is a setting, so tests
and the benchmark point it at a local stand-in that records what kefu sends.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from kefu.channels.wechat.tokens import AccessTokens, LocalTokenStore, TokenStore
from kefu.errors import ChannelError

log = logging.getLogger("kefu.wechat")

TIMEOUT = httpx.Timeout(5.0, connect=2.0)
# The token was refused: fetch a new one and try the call once more.
TOKEN_ERRORS = {40001, 40014, 42001}
# Retrying cannot help: invalid user, user unsubscribed, outside the 48-hour window, too
# many messages for this user's last message, the API not granted, 微信客服 session gone.
PERMANENT_ERRORS = {40003, 43004, 45015, 45047, 48001, 95016, 95017, 95018}


def _checked(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ChannelError(f"WeChat {what}: not a JSON object")
    errcode = int(data.get("errcode", 0) or 0)
    if errcode:
        raise ChannelError(
            f"WeChat {what}: {errcode} {data.get('errmsg', '')}".strip(),
            errcode=errcode,
            permanent=errcode in PERMANENT_ERRORS,
        )
    return data


class WeChatApi:
    """One WeChat API with its access token. ``token_path`` and ``token_params`` say how
    this product fetches its token (the 公众号's /cgi-bin/token, WeCom's /cgi-bin/gettoken)."""

    def __init__(
        self,
        base: str,
        *,
        token_path: str,
        token_params: dict[str, str],
        store: TokenStore | None = None,
        on_refresh: Any = None,
    ) -> None:
        self.base = base
        self.token_path = token_path
        self.token_params = token_params
        self.http = httpx.AsyncClient(base_url=base, timeout=TIMEOUT, trust_env=False)
        self.tokens = AccessTokens(
            self._fetch_token, store or LocalTokenStore(), on_refresh or (lambda: None)
        )

    async def _fetch_token(self) -> tuple[str, float]:
        data = await self._send("GET", self.token_path, params=self.token_params, what="token")
        token = data.get("access_token")
        if not isinstance(token, str) or not token:
            raise ChannelError("WeChat token: no access_token in the reply")
        return token, float(data.get("expires_in", 7200))

    async def _send(
        self,
        method: str,
        path: str,
        *,
        what: str,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        try:
            response = await self.http.request(method, path, params=params, json=body)
        except httpx.TimeoutException as exc:
            # A request that went out and got no answer may have been carried out.
            raise ChannelError(f"WeChat {what}: no answer ({type(exc).__name__})") from None
        except httpx.HTTPError as exc:
            raise ChannelError(f"WeChat {what}: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise ChannelError(f"WeChat {what}: HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise ChannelError(f"WeChat {what}: the reply is not JSON") from None
        return _checked(data, what)

    async def call(self, path: str, body: dict[str, Any], *, what: str) -> dict[str, Any]:
        """POST ``body`` with the access token; a token WeChat refuses is fetched again once."""
        for attempt in (1, 2):
            token = await self.tokens.get()
            try:
                return await self._send(
                    "POST", path, params={"access_token": token}, body=body, what=what
                )
            except ChannelError as exc:
                if exc.errcode in TOKEN_ERRORS and attempt == 1:
                    log.warning("WeChat refused the access token (%s); fetching a new one", exc)
                    await self.tokens.invalid(token)
                    continue
                raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.http.aclose()


def official_account_api(
    base: str, app_id: str, secret: str, store: TokenStore | None, on_refresh: Any = None
) -> WeChatApi:
    return WeChatApi(
        base,
        token_path="/cgi-bin/token",
        token_params={"grant_type": "client_credential", "appid": app_id, "secret": secret},
        store=store,
        on_refresh=on_refresh,
    )


def wecom_api(
    base: str, corp_id: str, secret: str, store: TokenStore | None, on_refresh: Any = None
) -> WeChatApi:
    return WeChatApi(
        base,
        token_path="/cgi-bin/gettoken",
        token_params={"corpid": corp_id, "corpsecret": secret},
        store=store,
        on_refresh=on_refresh,
    )
