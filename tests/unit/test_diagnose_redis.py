"""diagnose() names Redis when it fails, is slow, or its stages take the time."""

from __future__ import annotations

from kefu.observe.diagnose import diagnose
from kefu.observe.redis_calls import RedisCalls
from tests.unit.test_diagnose import finding, healthy, the


def test_no_redis_no_finding() -> None:
    assert finding(diagnose(healthy()), "redis") is None


def test_fast_redis_is_ok() -> None:
    redis = {"calls": 500, "errors": 0, "p50_ms": 0.2, "p99_ms": 1.1}
    assert the(diagnose(healthy(redis=redis)), "redis").status == "ok"


def test_slow_redis_or_its_stages_are_named() -> None:
    slow = {"calls": 500, "errors": 0, "p50_ms": 4.0, "p99_ms": 40.0}
    verdict = diagnose(healthy(redis=slow))
    assert the(verdict, "redis").status == "warn"
    assert "Redis is where the time goes" in the(verdict, "redis").message
    fast = {"calls": 500, "errors": 0, "p50_ms": 0.2, "p99_ms": 1.0}
    shares = {"session": 0.25, "limits": 0.05, "decode": 0.7}
    assert the(diagnose(healthy(redis=fast, stage_share=shares)), "redis").status == "warn"


def test_failing_redis_fails_the_verdict() -> None:
    failing = {"calls": 500, "errors": 12, "p50_ms": 0.2, "p99_ms": 250.0}
    verdict = diagnose(healthy(redis=failing))
    assert the(verdict, "redis").status == "fail"
    assert "12 failed" in the(verdict, "redis").message
    assert verdict.status == "unhealthy"


def test_recent_calls_summary() -> None:
    calls = RedisCalls()
    assert calls.summary(60) is None
    for ms in range(1, 101):
        calls.record("limits", ms / 1000, failed=ms == 100)
    summary = calls.summary(60)
    assert summary == {"calls": 100, "errors": 1, "p50_ms": 51.0, "p99_ms": 100.0}
