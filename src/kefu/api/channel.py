"""A messaging platform kefu answers on, as a package registers it under the
``kefu.channels`` entry points (``kefu.plugins``): the routes its callbacks arrive on,
and the part that runs beside the server (sweepers, tokens, relaying agents' replies).
kefu's own WeChat channel registers the same way (``kefu.api.wechat.routes:CHANNEL``)."""

from __future__ import annotations

from typing import Protocol

from starlette.requests import Request
from starlette.routing import BaseRoute

from kefu import plugins
from kefu.errors import EngineNotReady
from kefu.limits.bucket import Limiter
from kefu.service.outbound import Outbound
from kefu.service.runtime import Runtime
from kefu.settings import Settings
from kefu.shared.client import RedisClient


class RunningChannel(Outbound, Protocol):
    """A channel while the server runs: an agent's reply reaches its conversations."""

    def start(self) -> None: ...

    async def close(self) -> None: ...


class Channel(Protocol):
    def routes(self, settings: Settings) -> list[BaseRoute]:
        """Its routes under these settings (none when it is not configured)."""
        ...

    def open(
        self, runtime: Runtime, redis: RedisClient | None, limiter: Limiter
    ) -> RunningChannel | None:
        """Its running part, or None when it is not configured."""
        ...


def registered() -> dict[str, Channel]:
    """Every installed channel, by its entry point's name."""
    found: dict[str, Channel] = {}
    for name in plugins.names(plugins.CHANNELS):
        channel = plugins.load(plugins.CHANNELS, name)
        if not (
            callable(getattr(channel, "routes", None)) and callable(getattr(channel, "open", None))
        ):
            raise TypeError(
                f"channel '{name}' is registered as {channel!r}: no routes() and open()"
            )
        found[name] = channel  # type: ignore[assignment]
    return found


def running(request: Request, name: str) -> RunningChannel:
    """The named channel's running part, for its routes; 503 until the lifespan opened it."""
    opened: dict[str, RunningChannel] = getattr(request.app.state, "channels", {})
    channel = opened.get(name)
    if channel is None:
        raise EngineNotReady(f"the {name} channel is starting; retry", retry_after=1)
    return channel
