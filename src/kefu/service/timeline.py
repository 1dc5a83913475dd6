"""A request's timeline: when each stage was reached, on one monotonic clock.

Marks are ``time.perf_counter()`` readings, the clock the engine thread uses too,
so engine stages (prefill start, first token) line up with gateway stages.
"""

from __future__ import annotations

import time

from kefu.engine.base import EngineTimings

# Derived durations: name -> (from mark, to mark). Vocabulary from docs/ARCHITECTURE.md.
DURATIONS: dict[str, tuple[str, str]] = {
    "queue": ("admitted", "prefill_started"),
    "prefill": ("prefill_started", "first_token"),
    "decode": ("first_token", "last_token"),
    "ttft": ("received", "first_token"),
    "e2e": ("received", "done"),
}


class Timeline:
    def __init__(self, received: float | None = None) -> None:
        self.marks: dict[str, float] = {
            "received": time.perf_counter() if received is None else received
        }

    def mark(self, stage: str, at: float | None = None) -> None:
        self.marks[stage] = time.perf_counter() if at is None else at

    def mark_engine(self, timings: EngineTimings) -> None:
        for stage in ("prefill_started", "first_token", "last_token"):
            value = getattr(timings, stage)
            if value is not None:
                self.marks[stage] = value

    def duration_ms(self, start: str, end: str) -> float | None:
        if start in self.marks and end in self.marks:
            return round((self.marks[end] - self.marks[start]) * 1000, 3)
        return None

    def as_dict(self) -> dict[str, float]:
        """Stage offsets from ``received`` (``*_at_ms``) and derived durations (``*_ms``)."""
        start = self.marks["received"]
        ordered = sorted(self.marks.items(), key=lambda item: item[1])
        result = {f"{name}_at_ms": round((at - start) * 1000, 3) for name, at in ordered}
        for name, (begin, end) in DURATIONS.items():
            value = self.duration_ms(begin, end)
            if value is not None:
                result[f"{name}_ms"] = value
        return result

    def server_timing(self) -> str:
        """The ``Server-Timing`` header value: one entry per derived duration."""
        parts = []
        for name, (begin, end) in DURATIONS.items():
            value = self.duration_ms(begin, end)
            if value is not None:
                parts.append(f"{name};dur={value}")
        return ", ".join(parts)
