"""Recent Redis calls, for /stats and `kefu diagnose`: is Redis where the time goes?"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

KEEP = 20_000  # calls; a few minutes of a busy replica


class RedisCalls:
    def __init__(self) -> None:
        self._calls: deque[tuple[float, float, bool]] = deque(maxlen=KEEP)

    def record(self, op: str, seconds: float, failed: bool) -> None:
        self._calls.append((time.time(), seconds, failed))

    def summary(self, window: float, now: float | None = None) -> dict[str, Any] | None:
        """Calls, failures and latency percentiles (ms) in the window; None without any."""
        start = (time.time() if now is None else now) - window
        recent = [(seconds, failed) for at, seconds, failed in self._calls if at >= start]
        if not recent:
            return None
        latencies = sorted(seconds * 1000 for seconds, _ in recent)

        def at(q: float) -> float:
            return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3)

        return {
            "calls": len(recent),
            "errors": sum(failed for _, failed in recent),
            "p50_ms": at(0.50),
            "p99_ms": at(0.99),
        }
