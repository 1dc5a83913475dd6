"""Two model groups over HTTP (scripted upstreams; tests/e2e/test_model_groups.py runs real
servers): /v1 by model name, /v1/models, a 404 for an unknown model when so configured,
the group in /chat's routed entry and in /metrics, and each group's own admission."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from starlette.testclient import TestClient

from kefu.app import create_app
from kefu.engine.engines_file import GroupSpec
from kefu.engine.groups import EngineGroups
from kefu.settings import Settings
from tests.conftest import wait_ready
from tests.http.helpers import assert_envelope, serve, wait_until
from tests.http.scripted_upstream import ScriptedUpstream, chunk, text_chunks

URL = "/v1/chat/completions"
HI = [{"role": "user", "content": "hi"}]


class Shop:
    """A default group and an orders group, each one scripted engine."""

    def __init__(self) -> None:
        self.default = ScriptedUpstream([*text_chunks("from", " default"), chunk(finish="stop")])
        self.orders = ScriptedUpstream([*text_chunks("from", " orders"), chunk(finish="stop")])

    def engine(self, orders_parallel: int | None = None) -> EngineGroups:
        pools = {
            "default": self.default.pool(),
            "orders": self.orders.pool("orders-1", "small-orders", "orders"),
        }
        specs = {
            "default": GroupSpec("default", ("default",)),
            "orders": GroupSpec("orders", ("order_status",), orders_parallel),
        }
        return EngineGroups(pools, specs, "default")


@pytest.fixture
def shop() -> Shop:
    return Shop()


@pytest.fixture
def client(shop: Shop, settings_factory: Callable[..., Settings]) -> Iterator[TestClient]:
    app = create_app(settings_factory(), engine_factory=lambda _: shop.engine())
    with TestClient(app) as test_client:
        wait_ready(test_client)
        yield test_client


def reply(client: TestClient, model: str) -> str:
    response = client.post(URL, json={"model": model, "messages": HI})
    assert response.status_code == 200, response.text
    assert response.json()["model"] == model or not model
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


def test_v1_goes_to_the_group_of_the_model_asked_for(client: TestClient, shop: Shop) -> None:
    assert reply(client, "small-orders") == "from orders"
    assert reply(client, "orders") == "from orders"
    assert reply(client, "scripted-model") == "from default"
    assert reply(client, "") == "from default"
    assert reply(client, "gpt-4o") == "from default"  # --unknown-model default
    assert shop.orders.bodies[0]["model"] == "small-orders"  # the engine's own name


def test_v1_models_lists_each_groups_model(client: TestClient) -> None:
    cards = client.get("/v1/models").json()["data"]
    assert [(c["id"], c["meta"]["group"]) for c in cards] == [
        ("scripted-model", "default"),
        ("small-orders", "orders"),
    ]
    assert cards[1]["meta"]["intents"] == ["order_status"]


def test_an_unknown_model_is_a_404_in_the_envelope(
    shop: Shop, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(unknown_model="reject")
    with TestClient(create_app(settings, engine_factory=lambda _: shop.engine())) as client:
        wait_ready(client)
        for stream in (False, True):
            body = {"model": "gpt-4o", "messages": HI, "stream": stream}
            error = assert_envelope(client.post(URL, json=body), 404, "not_found")
            assert error["param"] == "model"
            assert "small-orders" in error["message"]
        assert reply(client, "small-orders") == "from orders"
    assert len(shop.default.bodies) == 0


def test_chat_turns_without_an_intent_go_to_the_default_group(client: TestClient) -> None:
    response = client.post("/chat", json={"message": "hello"})
    done = response.text.rsplit("event: done\ndata: ", 1)[1]
    assert '"group":"default"' in done.replace(" ", "")
    metrics = client.get("/metrics").text
    assert 'kefu_group_ttft_seconds_count{group="default"} 1.0' in metrics
    assert 'kefu_engine_requests_total{engine="orders-1",group="orders"} 0.0' in metrics
    assert 'kefu_group_requests_running{group="orders"} 0.0' in metrics
    rows = client.get("/ready").json()["engine"]["engines"]
    assert [row["group"] for row in rows] == ["default", "orders"]


@pytest.mark.anyio
async def test_a_full_group_refuses_and_the_other_answers(
    shop: Shop, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(admission="queue", max_queue=0, parallel=4)
    shop.orders.gate = asyncio.Event()
    app = create_app(settings, engine_factory=lambda _: shop.engine(orders_parallel=1))
    async with serve(app) as client:
        held = asyncio.create_task(client.post(URL, json={"model": "small-orders", "messages": HI}))
        await wait_until(lambda: shop.orders.sent >= 1)
        refused = await client.post(URL, json={"model": "small-orders", "messages": HI})
        assert_envelope(refused, 503, "queue_full")
        answered = await client.post(URL, json={"model": "", "messages": HI})
        assert answered.status_code == 200
        shop.orders.gate.set()
        assert (await held).status_code == 200
        metrics = (await client.get("/metrics")).text
        groups = (await client.get("/ready")).json()["groups"]
    assert groups["orders"]["refused"]["queue_full"] == 1
    assert groups["orders"]["refusals"]["with_free_slot"] == 0
    assert groups["default"]["refused"]["queue_full"] == 0
    assert groups["orders"]["policy"] == "queue"
    assert 'kefu_group_refusals_total{group="orders",reason="queue_full"} 1.0' in metrics
    assert 'kefu_group_refusals_total{group="default",reason="queue_full"} 0.0' in metrics
