"""Fixtures of the WeChat tests: the platform's stand-in, and kefu on a real socket (the
simulator's clock is a socket timeout) with its channels pointed at the stand-in."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from kefu.app import create_app
from kefu.engine.fake import FakeEngine
from kefu.settings import Settings
from tests.wechat.simulator import (
    CustomerServiceSimulator,
    OfficialAccountSimulator,
    WeChatPlatform,
    serve_in_thread,
)

APP_ID = "wx-test-app"
SECRET = "test-secret"
TOKEN = "shop-token"
CORP_ID = "ww-test-corp"


def aes_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()[:43]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def platform() -> Iterator[tuple[WeChatPlatform, str]]:
    stand_in = WeChatPlatform(app_id=APP_ID, secret=SECRET, corp_id=CORP_ID)
    with serve_in_thread(stand_in.app()) as url:
        yield stand_in, url


@dataclass
class Kefu:
    url: str
    platform: WeChatPlatform
    engine: FakeEngine
    aes_key: str
    app: Any

    def account(self, *, encrypted: bool = False, clock: float = 5.0) -> OfficialAccountSimulator:
        return OfficialAccountSimulator(
            f"{self.url}/wechat/mp",
            token=TOKEN,
            app_id=APP_ID,
            aes_key=self.aes_key if encrypted else None,
            clock=clock,
        )

    def customer_service(self) -> CustomerServiceSimulator:
        return CustomerServiceSimulator(
            f"{self.url}/wechat/kf", token=TOKEN, aes_key=self.aes_key, corp_id=CORP_ID
        )


KefuFactory = Callable[..., AbstractContextManager[Kefu]]


@pytest.fixture
def kefu_factory(tmp_path: Path, platform: tuple[WeChatPlatform, str]) -> KefuFactory:
    stand_in, api = platform

    @contextmanager
    def make(
        engine: FakeEngine | None = None, *, ready: bool = True, **overrides: Any
    ) -> Iterator[Kefu]:
        key = aes_key()
        values: dict[str, Any] = {
            "engine": "fake",
            "data_dir": tmp_path / "data",
            "fast_path": False,
            "warmup": False,
            "wechat_app_id": APP_ID,
            "wechat_app_secret": SECRET,
            "wechat_token": TOKEN,
            "wechat_aes_key": key,
            "wechat_api_base": api,
            "wechat_reply_budget": 1.0,
            "wechat_kf_corp_id": CORP_ID,
            "wechat_kf_secret": SECRET,
            "wechat_kf_token": TOKEN,
            "wechat_kf_aes_key": key,
            "wechat_kf_api_base": api,
        }
        values.update(overrides)
        chosen = engine or FakeEngine()
        app = create_app(Settings(**values), engine_factory=lambda _: chosen)
        with serve_in_thread(app) as url:
            deadline = time.monotonic() + 60
            while ready and httpx.get(f"{url}/ready").status_code != 200:
                assert time.monotonic() < deadline, "kefu was not ready in 60 s"
                time.sleep(0.02)
            yield Kefu(url, stand_in, chosen, key, app)

    return make
