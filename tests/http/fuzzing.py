"""schemathesis over every operation of kefu's /openapi.json, in process: the checks and the run.

Shared by tests/http/test_openapi_fuzz.py (a few examples per operation, in CI) and
benchmarks/fuzz.py (many, optionally on the real model). Each operation gets
``examples`` valid requests and ``examples`` invalid ones (schemathesis's negative
mode), derandomised so a run repeats; every response goes through CHECKS.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from requests.exceptions import RequestException
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.schemas import APIOperation, BaseSchema

# Imported here, at collection, not lazily inside a test: pytest rewrites schemathesis's
# modules as it imports them (it is a pytest plugin), and CPython 3.11.7's compiler failed
# on them now and then from a deep stack ("AST constructor recursion depth mismatch").
from schemathesis.specs.openapi import schemas as _schemas  # noqa: F401
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

ENVELOPE_KEYS = {"message", "type", "param", "code"}


def error_envelope(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """Every 4xx/5xx is ``{"error": {"message", "type", "param", "code"}}``, unless the
    document gives that status another schema (/ready's 503 is its readiness body)."""
    if response.status_code < 400:
        return None
    documented = case.operation.responses.find_by_status_code(response.status_code)
    if documented is not None:
        content = (documented.definition or {}).get("content", {})
        ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
        if ref and not ref.endswith("/ErrorEnvelope"):
            return None
    body = response.json()
    assert isinstance(body, dict), f"{response.status_code}: not a JSON object: {body!r}"
    assert set(body) == {"error"}, f"{response.status_code}: not the envelope: {body!r}"
    error = body["error"]
    assert set(error) == ENVELOPE_KEYS, f"{response.status_code}: {body!r}"
    assert isinstance(error["message"], str), body
    assert error["message"], body
    assert isinstance(error["type"], str), body
    return True


CHECKS: list[Callable[..., Any]] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    error_envelope,
]


@dataclass
class FuzzReport:
    operations: int = 0
    examples: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)  # "label [mode]: check" -> repro
    seconds: dict[str, float] = field(default_factory=dict)  # per operation

    def summary(self) -> str:
        return (
            f"{self.operations} operations, {self.examples} examples, "
            f"{len(self.failures)} distinct failures"
        )


def fuzz(
    schema: BaseSchema,
    *,
    examples: int,
    timeout: float = 10.0,
    modes: tuple[GenerationMode, ...] = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE),
) -> FuzzReport:
    report = FuzzReport()
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an Err raises here: a bad document
        report.operations += 1
        started = time.perf_counter()
        for mode in modes:
            try:
                _runner(operation, mode, report, examples, timeout)()
            except Unsatisfiable:
                if mode is GenerationMode.POSITIVE:
                    raise
                # Nothing about the operation can be invalid: no body, no parameters.
        report.seconds[operation.label] = time.perf_counter() - started
    return report


def _runner(
    operation: APIOperation[Any, Any, Any, Any],
    mode: GenerationMode,
    report: FuzzReport,
    examples: int,
    timeout: float,
) -> Callable[[], None]:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Case[Any]) -> None:
        report.examples += 1
        try:
            response = case.call_and_validate(checks=CHECKS, timeout=timeout)
        except RequestException as exc:  # no answer in time: a failure to count, not a crash
            key = f"{case.operation.label} [{mode}]: {type(exc).__name__}"
            report.failures.setdefault(key, f"{exc}\n{case.as_curl_command()}")
            return
        except (AssertionError, FailureGroup) as exc:
            failures = exc.exceptions if isinstance(exc, FailureGroup) else (exc,)
            for failure in failures:
                title = str(getattr(failure, "title", type(failure).__name__))
                key = f"{case.operation.label} [{mode}]: {title}"
                message = str(failure).strip().splitlines()[:8]
                report.failures.setdefault(key, "\n".join([*message, case.as_curl_command()]))
            return
        report.statuses[response.status_code] += 1

    result: Callable[[], None] = run
    return result
