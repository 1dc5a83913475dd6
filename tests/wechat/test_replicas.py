"""Two ``kefu serve`` replicas (FakeEngine) on one redis-server behind a balancer that sends
each of WeChat's tries to the next replica: one access token for both, and a replica
killed mid-answer loses nothing and doubles nothing."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.support import KefuServer
from tests.shared.support import running_redis
from tests.wechat.conftest import APP_ID, SECRET, TOKEN, aes_key
from tests.wechat.simulator import OfficialAccountSimulator, WeChatPlatform, serve_in_thread

pytestmark = pytest.mark.anyio


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[list[KefuServer], WeChatPlatform, str]]:
    platform = WeChatPlatform(app_id=APP_ID, secret=SECRET)
    key = aes_key()
    with running_redis(tmp_path / "redis") as redis, serve_in_thread(platform.app()) as api:
        servers = [
            KefuServer(
                tmp_path / f"data{i}",
                tmp_path / f"kefu{i}.log",
                [
                    *("--engine", "fake", "--fake-prefill-delay", "1.5"),
                    *("--no-fast-path", "--no-warmup", "--redis", redis.url),
                    *("--wechat-app-id", APP_ID, "--wechat-app-secret", SECRET),
                    *("--wechat-token", TOKEN, "--wechat-aes-key", key),
                    *("--wechat-api-base", api, "--wechat-reply-budget", "0.5"),
                ],
            )
            for i in range(2)
        ]
        try:
            for server in servers:
                server.data_dir.mkdir(parents=True)
                server.start()
            yield servers, platform, key
        finally:
            for server in servers:
                server.stop()


async def test_a_replica_killed_mid_answer_loses_nothing_and_doubles_nothing(
    replicas: tuple[list[KefuServer], WeChatPlatform, str],
) -> None:
    servers, platform, key = replicas
    account = OfficialAccountSimulator(
        [f"{s.url}/wechat/mp" for s in servers], token=TOKEN, app_id=APP_ID, aes_key=key
    )
    async with httpx.AsyncClient() as client:
        # Slow answers on both replicas go out through the API: one token for both.
        warm = await asyncio.gather(
            *(
                account.deliver(client, account.text(f"o-warm-{i}", f"warm {i}"), first=i)
                for i in range(4)
            )
        )
        assert all(d.tries[0].body == "success" for d in warm)
        deadline = time.monotonic() + 20
        while len(platform.sent) < 4:
            assert time.monotonic() < deadline, platform.sent
            await asyncio.sleep(0.05)
        assert platform.token_fetches == 1

        # WeChat's first try reaches replica 0, which dies while the engine works.
        xml = account.text("o-victim", "answer me once")
        delivery = asyncio.create_task(account.deliver(client, xml, first=0))
        await asyncio.sleep(0.3)
        servers[0].send_signal(signal.SIGKILL)
        result = await delivery
    # The broken connection made WeChat try again, on replica 1, which took the message
    # over once replica 0's lease ran out (and the session's lock, 30 s, after it).
    assert result.tries[0].status is None
    assert result.tries[1].status == 200
    deadline = time.monotonic() + 60
    while not platform.texts_to("o-victim"):
        assert time.monotonic() < deadline, "the answer was lost"
        await asyncio.sleep(0.1)
    await asyncio.sleep(2.0)
    assert platform.texts_to("o-victim") == ["fake reply to: answer me once"]
    assert platform.token_fetches == 1
