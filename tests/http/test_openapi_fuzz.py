"""schemathesis over every operation of /openapi.json, against the app in process (fake engine).

A few valid and a few invalid requests per operation (derandomised, so a run repeats):
no 5xx, every response matches its documented status, content type, headers and
schema (SSE events too), invalid input is refused with a 4xx, and every 4xx/5xx body
is the OpenAI error envelope. benchmarks/fuzz.py runs the same with more examples.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.python import asgi
from starlette.applications import Starlette

from kefu.auth.policy import PUBLIC
from kefu.engine.fake import FakeEngine
from kefu.settings import Settings
from tests.http.fuzzing import fuzz
from tests.http.helpers import make_app

EXAMPLES = 5


def wait_ready(app: Starlette) -> None:
    """schemathesis's client starts the app's lifespan; the model loads in the background."""
    with asgi.get_client(app) as client:  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        while client.get(f"http://{asgi.HOST}/ready").status_code != 200:
            assert time.monotonic() < deadline, "the app did not become ready"
            time.sleep(0.05)


def test_every_operation_holds_to_the_document(tmp_path_factory: pytest.TempPathFactory) -> None:
    values: dict[str, Any] = {
        "engine": ("fake",),
        "data_dir": tmp_path_factory.mktemp("fuzz"),
        "second_look": False,
    }
    settings = Settings(**values)
    app = make_app(settings, FakeEngine())
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        wait_ready(app)
        report = fuzz(schema, examples=EXAMPLES)
    finally:
        asgi.shutdown_lifespans()  # schemathesis started the app's lifespan on its first request
    # Every operation but the document itself, which schemathesis leaves out.
    documented = sum(len(item) for item in schema.raw_schema["paths"].values())
    assert report.operations == documented - 1
    assert report.examples >= report.operations * 2
    assert not report.failures, "\n\n".join(f"{k}\n{v}" for k, v in report.failures.items())


def test_with_auth_on_every_refusal_is_documented(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """--auth keys and no credential: the secured operations answer 401 in the envelope,
    as the document says; the public ones answer."""
    values: dict[str, Any] = {
        "engine": ("fake",),
        "data_dir": tmp_path_factory.mktemp("fuzz-auth"),
        "fast_path": False,
        "auth": "keys",
    }
    app = make_app(Settings(**values), FakeEngine())
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        wait_ready(app)
        report = fuzz(schema, examples=2, modes=(GenerationMode.POSITIVE,))
    finally:
        asgi.shutdown_lifespans()
    assert not report.failures, "\n\n".join(f"{k}\n{v}" for k, v in report.failures.items())
    paths = schema.raw_schema["paths"].values()
    secured = sum(1 for item in paths for operation in item.values() if operation["security"])
    assert secured == sum(len(item) for item in paths) - len(PUBLIC)
    assert report.statuses[401] >= secured
