"""The app on a pool of remote engines that are all down: answers 503 at once, shows why."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from starlette.testclient import TestClient

from kefu.app import create_app
from kefu.settings import Settings
from tests.conftest import wait_ready


def dead_port() -> int:
    """A loopback port nothing listens on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_every_engine_down_is_an_immediate_503(settings_factory: Callable[..., Settings]) -> None:
    urls = [f"http://127.0.0.1:{dead_port()}/v1" for _ in range(2)]
    settings = settings_factory(engine=urls, engine_check_interval=60, breaker_cooldown=7)
    with TestClient(create_app(settings)) as client:
        wait_ready(client)  # kefu serves while its engines come up: they start tripped
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
        started = time.perf_counter()
        for response in (
            client.post("/v1/chat/completions", json=body),
            client.post("/chat", json={"message": "hi"}),
        ):
            assert response.status_code == 503
            assert response.headers["retry-after"] == "7"
            assert response.json()["error"]["code"] == "engine_unavailable"
        assert time.perf_counter() - started < 2
        ready = client.get("/ready").json()["engine"]
        assert [row["breaker"] for row in ready["engines"]] == ["open", "open"]
        assert [row["healthy"] for row in ready["engines"]] == [False, False]
        assert ready["token_counting"].startswith("estimate")
        metrics = client.get("/metrics").text
        name = urls[0].removeprefix("http://").removesuffix("/v1")
        assert f'kefu_engine_breaker_state{{engine="{name}",group="default"}} 2.0' in metrics
