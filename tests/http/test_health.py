"""The web page, the probes, and the app's lifespan."""

from __future__ import annotations

import asyncio
import gc

import pytest
from starlette.testclient import TestClient

from kefu.engine.fake import FakeEngine
from tests.conftest import ClientFactory
from tests.http.helpers import (
    GatedEngine,
    SettingsFactory,
    admission_load,
    make_app,
    serve,
    wait_until,
)


def test_chat_page(shared_client: TestClient) -> None:
    response = shared_client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    page = response.text
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert "<title>kefu</title>" in page  # no --shop-name, and no demo without the fast path
    assert '"/chat"' in page  # the page talks to the session API
    assert "/sessions/" in page
    assert "http://" not in page
    assert "https://" not in page, "the page must not load anything from a CDN"


def test_chat_page_head(shared_client: TestClient) -> None:
    response = shared_client.head("/")
    assert response.status_code == 200
    assert response.content == b""


def test_health(shared_client: TestClient) -> None:
    response = shared_client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_after_start(shared_client: TestClient) -> None:
    response = shared_client.get("/ready")
    assert response.status_code == 200
    assert "retry-after" not in response.headers
    body = response.json()
    assert body["status"] == "ready"
    assert body["error"] is None
    assert body["model"] == "fake-engine"
    engine = body["engine"]
    assert {"running", "waiting", "slots", "kv_used_cells", "kv_total_cells"} <= set(engine)
    assert engine["running"] == 0
    admission = body["admission"]
    assert {k: admission[k] for k in ("running", "waiting", "reading")} == {
        "running": 0,
        "waiting": 0,
        "reading": 0,
    }
    assert admission["refused"] == {"overloaded": 0, "queue_full": 0, "queue_timeout": 0}
    assert set(admission["prompt_reading"]) == {"samples", "fixed_s", "per_token_ms"}
    assert (admission["policy"], admission["shadow"]) == ("predicted", False)
    predictions = admission["predictions"]
    assert (predictions["outcomes"], predictions["calibrated"]) == (0, False)
    none = {"total": 0, "by_code": {}, "with_free_slot": 0, "with_room": 0}
    assert admission["refusals"] == none


@pytest.mark.anyio
async def test_ready_reports_load(settings_factory: SettingsFactory) -> None:
    engine = GatedEngine()
    app = make_app(settings_factory(), engine)
    async with serve(app) as client:
        turn = asyncio.create_task(client.post("/chat", json={"message": "hi"}))
        await wait_until(lambda: ("start", "hi") in engine.log)
        ready = (await client.get("/ready")).json()
        assert admission_load(ready) == (1, 0, 1)
        assert ready["admission"]["prompt_reading"]["samples"] == 0
        engine.release()
        assert (await turn).status_code == 200
        ready = (await client.get("/ready")).json()
        assert admission_load(ready) == (0, 0, 0)
        # The prompt's first token measured the engine: one sample of the reading line.
        assert ready["admission"]["prompt_reading"]["samples"] == 1
        assert ready["admission"]["predictions"]["outcomes"] == 0  # nothing to predict from
        engine.release()
        assert (await client.post("/chat", json={"message": "hi again"})).status_code == 200
        ready = (await client.get("/ready")).json()
        predictions = ready["admission"]["predictions"]
        assert predictions["outcomes"] == 1  # predicted from the first, beside what happened
        assert predictions["ratio_p50"] is not None
        assert ready["engine"]["running"] == 0


def test_lifespan_starts_and_closes_the_engine(
    client_factory: ClientFactory, fake_engine: FakeEngine
) -> None:
    with client_factory() as client:
        assert fake_engine.started
        assert client.get("/ready").status_code == 200
    assert not fake_engine.started


def test_sessions_survive_a_restart(client_factory: ClientFactory) -> None:
    with client_factory() as client:
        response = client.post("/chat", json={"message": "remember me"})
        session_id = response.text.split('"session_id": "')[1].split('"')[0]
    with client_factory() as client:
        messages = client.get(f"/sessions/{session_id}").json()["messages"]
    assert [m["content"] for m in messages] == ["remember me", "fake reply to: remember me"]


def test_models_are_served_from_the_engine(client_factory: ClientFactory) -> None:
    engine = FakeEngine(model_id="smollm2-135m", context_window=4096)
    with client_factory(engine=engine) as client:
        card = client.get("/v1/models").json()["data"][0]
        ready = client.get("/ready").json()
    assert card["id"] == "smollm2-135m"
    assert card["meta"]["context_window"] == 4096
    assert ready["model"] == "smollm2-135m"


@pytest.mark.anyio
async def test_the_loaded_state_is_frozen_out_of_the_collectors_sight_while_serving(
    settings_factory: SettingsFactory,
) -> None:
    app = make_app(settings_factory(fast_path=True), FakeEngine())
    async with serve(app):
        await wait_until(lambda: gc.get_freeze_count() > 0)
    assert gc.get_freeze_count() == 0  # the lifespan's end gives it back
