"""Thin routes of the WeChat channels (logic: ``kefu.channels.wechat``): ``/wechat/mp``
for an Official Account, ``/wechat/kf`` for WeChat Customer Service. Each exists only
when its channel is configured. WeChat signs its requests instead of sending a key, so
auth lets them through (auth/policy.py) and the channel checks the signature."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from kefu.api.body import read_body
from kefu.api.channel import running
from kefu.channels.wechat.channels import WeChatChannels, configured, open_wechat
from kefu.limits.bucket import Limiter
from kefu.observe.timeline import Timeline
from kefu.service.runtime import Runtime
from kefu.settings import Settings
from kefu.shared.client import RedisClient

XML = "application/xml"


def _channels(request: Request) -> WeChatChannels:
    channels = running(request, NAME)
    assert isinstance(channels, WeChatChannels)
    return channels


async def _body(request: Request) -> bytes:
    settings = _runtime(request).settings
    return await read_body(request, settings.max_body_bytes, settings.body_timeout)


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def official_account(request: Request) -> Response:
    account = _channels(request).official_account
    assert account is not None  # the route exists only with the channel
    query = dict(request.query_params)
    if request.method == "GET":
        return PlainTextResponse(account.verify_url(query))
    timeline: Timeline = request.state.timeline
    body = await _body(request)
    timeline.mark("parsed")
    reply = await account.handle(query, body, received=timeline.marks["received"])
    return Response(reply, media_type=XML if reply.startswith("<") else "text/plain")


async def customer_service(request: Request) -> Response:
    service = _channels(request).customer_service
    assert service is not None
    query = dict(request.query_params)
    if request.method == "GET":
        return PlainTextResponse(service.verify_url(query))
    body = await _body(request)
    return PlainTextResponse(service.handle(query, body))


class WeChat:
    """The channel as kefu.channels registers it (pyproject.toml)."""

    def routes(self, settings: Settings) -> list[BaseRoute]:
        official, kf = configured(settings)
        found: list[BaseRoute] = []
        if official:
            found.append(Route("/wechat/mp", official_account, methods=["GET", "POST"]))
        if kf:
            found.append(Route("/wechat/kf", customer_service, methods=["GET", "POST"]))
        return found

    def open(
        self, runtime: Runtime, redis: RedisClient | None, limiter: Limiter
    ) -> WeChatChannels | None:
        return open_wechat(runtime, redis, limiter)


NAME = "wechat"  # its entry point's name
CHANNEL = WeChat()
