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
from schemathesis.python import asgi

from kefu.engine.fake import FakeEngine
from kefu.settings import Settings
from tests.http.fuzzing import fuzz
from tests.http.helpers import make_app

EXAMPLES = 5


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
        with asgi.get_client(app) as client:  # type: ignore[arg-type]
            deadline = time.monotonic() + 60
            while client.get(f"http://{asgi.HOST}/ready").status_code != 200:
                assert time.monotonic() < deadline, "the app did not become ready"
                time.sleep(0.05)
        report = fuzz(schema, examples=EXAMPLES)
    finally:
        asgi.shutdown_lifespans()  # schemathesis started the app's lifespan on its first request
    # Every operation but the document itself, which schemathesis leaves out.
    documented = sum(len(item) for item in schema.raw_schema["paths"].values())
    assert report.operations == documented - 1
    assert report.examples >= report.operations * 2
    assert not report.failures, "\n\n".join(f"{k}\n{v}" for k, v in report.failures.items())
