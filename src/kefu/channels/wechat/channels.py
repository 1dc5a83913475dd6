"""The WeChat channels a server runs, built from the settings in the app's lifespan:
their ledger and tokens (Redis with --redis), their sweepers, and the relay of agents'
replies to WeChat users."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass, field

from kefu.channels.wechat.answers import Answers
from kefu.channels.wechat.api import WeChatApi, official_account_api, wecom_api
from kefu.channels.wechat.customer_service import CHANNEL as KF
from kefu.channels.wechat.customer_service import (
    CustomerService,
    KfOutbox,
    LocalCursors,
    RedisCursors,
)
from kefu.channels.wechat.desk import Desk, DeskMetrics, Outbox
from kefu.channels.wechat.envelope import OfficialAccountEnvelope, WeComEnvelope
from kefu.channels.wechat.ledger import Ledger, LocalLedger
from kefu.channels.wechat.official_account import CHANNEL as MP
from kefu.channels.wechat.official_account import CustomerServiceMessages, OfficialAccount
from kefu.channels.wechat.redis_ledger import RedisLedger
from kefu.channels.wechat.tokens import RedisTokenStore, TokenStore
from kefu.limits.bucket import Limiter
from kefu.limits.rate import Rate
from kefu.service.runtime import Runtime
from kefu.settings import Settings
from kefu.shared.client import RedisClient
from kefu.store.base import Session


def configured(settings: Settings) -> tuple[bool, bool]:
    """Whether the 公众号 and 微信客服 channels are on (their routes exist then)."""
    return bool(settings.wechat_app_id), bool(settings.wechat_kf_corp_id)


@dataclass
class WeChatChannels:
    official_account: OfficialAccount | None = None
    customer_service: CustomerService | None = None
    desks: list[Desk] = field(default_factory=list)
    apis: list[WeChatApi] = field(default_factory=list)
    ledger: Ledger = field(default_factory=LocalLedger)
    _sweepers: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self._sweepers = [asyncio.create_task(desk.sweep_forever()) for desk in self.desks]

    async def close(self) -> None:
        for task in self._sweepers:
            task.cancel()
        for task in self._sweepers:
            with suppress(asyncio.CancelledError):
                await task
        if self.customer_service is not None:
            await self.customer_service.close()
        for api in self.apis:
            await api.close()
        await self.ledger.close()

    # The service's Outbound: an agent's reply to a WeChat user goes out through the API.
    def reaches(self, session_id: str) -> bool:
        return self._desk_of(session_id) is not None

    async def deliver(self, session: Session, text: str) -> None:
        desk = self._desk_of(session.id)
        if desk is not None and session.user_id:
            await desk.relay(session.user_id, text)

    def _desk_of(self, session_id: str) -> Desk | None:
        prefix = session_id.partition("-")[0]
        return next((d for d in self.desks if prefix == f"wx{d.channel}"), None)


def open_wechat(
    runtime: Runtime, redis: RedisClient | None, limiter: Limiter
) -> WeChatChannels | None:
    settings = runtime.settings
    mp_on, kf_on = configured(settings)
    if not (mp_on or kf_on):
        return None
    metrics = DeskMetrics(runtime.observer.metrics.registry)
    ledger: Ledger = RedisLedger(redis) if redis is not None else LocalLedger()
    channels = WeChatChannels(ledger=ledger)
    rate = Rate.parse(settings.rate_limit)

    def desk(channel: str, account: str, outbox: Outbox) -> Desk:
        answers = Answers(runtime, channel=channel, account=account, limiter=limiter, rate=rate)
        made = Desk(
            channel=channel,
            runtime=runtime,
            ledger=ledger,
            answers=answers,
            outbox=outbox,
            metrics=metrics,
        )
        channels.desks.append(made)
        return made

    def store(name: str) -> TokenStore | None:
        return RedisTokenStore(redis, name) if redis is not None else None

    if mp_on:
        app_id = settings.wechat_app_id
        assert app_id
        assert settings.wechat_app_secret
        assert settings.wechat_token
        api = official_account_api(
            settings.wechat_api_base,
            app_id,
            settings.wechat_app_secret,
            store(f"mp:{app_id}"),
            metrics.token_refreshes.labels(MP).inc,
        )
        channels.apis.append(api)
        channels.official_account = OfficialAccount(
            OfficialAccountEnvelope(settings.wechat_token, settings.wechat_aes_key, app_id),
            desk(MP, app_id, CustomerServiceMessages(api)),
            api,
            settings.wechat_reply_budget,
        )
    if kf_on:
        corp_id = settings.wechat_kf_corp_id
        assert corp_id
        assert settings.wechat_kf_secret
        assert settings.wechat_kf_token
        assert settings.wechat_kf_aes_key
        api = wecom_api(
            settings.wechat_kf_api_base,
            corp_id,
            settings.wechat_kf_secret,
            store(f"kf:{corp_id}"),
            metrics.token_refreshes.labels(KF).inc,
        )
        channels.apis.append(api)
        channels.customer_service = CustomerService(
            WeComEnvelope(settings.wechat_kf_token, settings.wechat_kf_aes_key, corp_id),
            desk(KF, corp_id, KfOutbox(api)),
            api,
            RedisCursors(redis) if redis is not None else LocalCursors(),
            corp_id,
        )
    return channels
