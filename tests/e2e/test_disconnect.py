"""A client that leaves mid-stream frees its engine slot."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.e2e.support import KefuServer, sse_frames

pytestmark = pytest.mark.e2e

FREE_TIMEOUT_S = 10.0


def load(state: dict[str, Any]) -> tuple[int, int]:
    """(customers' sequences in the engine, admission slots held): an earlier test's
    fast-path turn may still be read ahead, background work that yields to customers."""
    engine = state["engine"]
    return engine["running"] - engine["background"], state["admission"]["running"]


def test_disconnect_frees_the_slot(kefu_server: KefuServer, model_id: str) -> None:
    # Nothing in the engine, background work included: the KV cells counted below are
    # this test's own.
    state = wait_idle(kefu_server, FREE_TIMEOUT_S, background=True)
    assert state["engine"]["running"] == 0, f"the engine is not idle to begin with: {state}"
    assert load(state) == (0, 0), f"the server is not idle to begin with: {state}"
    body = {
        "model": model_id,
        "messages": [
            {
                "role": "user",
                "content": "Tell me a very long story, with many chapters, about a cat "
                "who sails around the world.",
            }
        ],
        "max_tokens": 400,
        "temperature": 0,
        "stream": True,
    }
    contents: list[str] = []
    # A client of its own, so closing the response really closes the connection.
    with (
        httpx.Client(base_url=kefu_server.url, timeout=30.0) as client,
        client.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        # Keep the iterator referenced: dropping it would close the connection early.
        frames = sse_frames(response.iter_bytes())
        while len(contents) < 2:
            choice = next(frames).json()["choices"][0]
            assert choice.get("finish_reason") is None, "the reply ended before we left"
            if choice["delta"].get("content"):
                contents.append(choice["delta"]["content"])
        # Still connected and mid-reply: the request holds a slot in both places.
        assert load(kefu_server.ready_state()) == (1, 1)
        frames.close()
    # The response and its connection are closed now, mid-reply.

    deadline = time.monotonic() + FREE_TIMEOUT_S
    state = kefu_server.ready_state()
    while load(state) != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
        state = kefu_server.ready_state()
    assert load(state) == (0, 0), f"the slot was not freed: {state}"
    assert state["engine"]["kv_used_cells"] == 0
    assert state["status"] == "ready"

    # And the freed slot serves the next request.
    after = httpx.post(
        kefu_server.url + "/v1/chat/completions",
        json=body | {"stream": False, "max_tokens": 4},
        timeout=30.0,
    )
    assert after.status_code == 200, after.text
    assert after.json()["choices"][0]["message"]["content"]


def wait_idle(server: KefuServer, timeout: float, *, background: bool = False) -> dict[str, Any]:
    """The server's state once no customer holds a slot (and, with ``background``, no
    sequence at all is in the engine), or at ``timeout``."""

    def busy(state: dict[str, Any]) -> bool:
        return load(state) != (0, 0) or (background and state["engine"]["running"] > 0)

    deadline = time.monotonic() + timeout
    state = server.ready_state()
    while busy(state) and time.monotonic() < deadline:
        time.sleep(0.05)
        state = server.ready_state()
    return state


def test_non_stream_disconnect_frees_the_slot(kefu_server: KefuServer, model_id: str) -> None:
    body = {
        "model": model_id,
        "messages": [
            {
                "role": "user",
                "content": "Tell me a very long story, with many chapters, about a cat "
                "who sails around the world.",
            }
        ],
        # As long as the window allows: ~20 s of decoding at full speed, far beyond the wait.
        "max_tokens": 1900,
        "temperature": 0,
    }
    try:
        # The client gives up after 1 s without an answer, as an SDK timeout would.
        with (
            httpx.Client(base_url=kefu_server.url, timeout=httpx.Timeout(30.0, read=1.0)) as c,
            pytest.raises(httpx.ReadTimeout),
        ):
            c.post("/v1/chat/completions", json=body)
        state = wait_idle(kefu_server, 5.0)
        assert load(state) == (0, 0), f"the reply runs on for nobody: {state}"
    finally:
        # Without the fix the reply runs on for seconds; restart rather than let it slow,
        # and change the batches of, the tests after this one.
        if load(wait_idle(kefu_server, 1.0)) != (0, 0):
            kefu_server.restart()
