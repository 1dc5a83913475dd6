"""A request's timeline: when each stage was reached, on one monotonic clock, and its outcome.

Marks are ``time.perf_counter()`` readings, the clock the engine thread uses too,
so engine stages (prefill start, first token) line up with gateway stages. The
stages partition the request: each runs from the previous mark to its own, so
their durations always add up to the whole.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from kefu.engine.base import EngineTimings, Routed, Usage

# Derived durations: name -> (from mark, to mark). Vocabulary from docs/ARCHITECTURE.md.
DURATIONS: dict[str, tuple[str, str]] = {
    "queue": ("admitted", "prefill_started"),
    "prefill": ("prefill_started", "first_token"),
    "decode": ("first_token", "last_token"),
    # The first reply text: a token from the engine, or a fast-path answer.
    "ttft": ("received", "first_output"),
    "e2e": ("received", "done"),
}


@dataclass
class Outcome:
    """What the request produced, filled in by the layer that knows it."""

    tier: str | None = None
    turn: int | None = None  # /chat: this message's turn number in its session
    usage: Usage | None = None
    finish_reason: str | None = None
    error: str | None = None  # the KefuError code, when the request failed
    # The model group that answered (or failed) an LLM request.
    group: str | None = None
    # A pool of remote engines: which engine answered (or failed), and why it was chosen.
    engine: str | None = None
    route_reason: str | None = None
    attempts: int = 0
    # Admission's calibrated prediction of the TTFT (seconds), beside the realized one.
    predicted_ttft: float | None = None
    # /chat: prompt tokens left unread to meet the TTFT SLO (service/prompt_fit.py).
    fitted_tokens: int | None = None


# A stage is named for the work that ends at its mark.
STAGE_OF_MARK = {
    "authenticated": "auth",
    "limited": "limits",
    "parsed": "parse",
    "session_locked": "session",
    "context_built": "context",
    "routed": "route",
    "answered": "answer",
    "admitted": "admission",
    "prefill_started": "queue",
    "first_token": "prefill",
    "last_token": "decode",
    "done": "finish",
    "sent": "send",
    "ended": "send",
}


class Timeline:
    def __init__(self, received: float | None = None) -> None:
        self.marks: dict[str, float] = {
            "received": time.perf_counter() if received is None else received
        }
        self.outcome = Outcome()

    def mark(self, stage: str, at: float | None = None) -> None:
        self.marks[stage] = time.perf_counter() if at is None else at

    def mark_engine(self, timings: EngineTimings) -> None:
        for stage in ("prefill_started", "first_token", "last_token"):
            value = getattr(timings, stage)
            if value is not None:
                self.marks[stage] = value

    def routed(self, routed: Routed | None) -> None:
        if routed is not None:
            self.outcome.engine = routed.engine
            self.outcome.route_reason = routed.reason
            self.outcome.attempts = routed.attempts

    def routing(self) -> dict[str, str | int] | None:
        """The ``routed`` entry of a reply from a pool: its group, engine, why, and
        attempts."""
        outcome = self.outcome
        if outcome.engine is None:
            return None
        return {
            "group": outcome.group or "",
            "engine": outcome.engine,
            "why": outcome.route_reason or "",
            "attempts": outcome.attempts,
        }

    def finished(self, usage: Usage, finish_reason: str) -> None:
        self.outcome.usage = usage
        self.outcome.finish_reason = finish_reason

    def at(self, mark: str) -> float | None:
        if mark == "first_output":
            return self.marks.get("first_token", self.marks.get("answered"))
        return self.marks.get(mark)

    def duration_ms(self, start: str, end: str) -> float | None:
        begin, finish = self.at(start), self.at(end)
        if begin is not None and finish is not None:
            return round((finish - begin) * 1000, 3)
        return None

    def ordered(self) -> list[tuple[str, float]]:
        return sorted(self.marks.items(), key=lambda item: item[1])

    def stages_ms(self) -> dict[str, float]:
        """Time spent in each stage (previous mark to this one), in order; sums to the total."""
        ordered = self.ordered()
        return {
            STAGE_OF_MARK.get(name, name): round((at - before) * 1000, 3)
            for (_, before), (name, at) in itertools.pairwise(ordered)
        }

    def as_dict(self) -> dict[str, float]:
        """Stage offsets from ``received`` (``*_at_ms``) and derived durations (``*_ms``)."""
        start = self.marks["received"]
        result = {f"{name}_at_ms": round((at - start) * 1000, 3) for name, at in self.ordered()}
        for name, (begin, end) in DURATIONS.items():
            value = self.duration_ms(begin, end)
            if value is not None:
                result[f"{name}_ms"] = value
        if self.outcome.engine is not None and "prefill_ms" in result:
            # A remote engine's prefill is what kefu sees of it: request sent to first token.
            result["upstream_ttft_ms"] = result["prefill_ms"]
        if self.outcome.predicted_ttft is not None:
            result["predicted_ttft_ms"] = round(self.outcome.predicted_ttft * 1000, 3)
        return result

    def server_timing(self) -> str:
        """The ``Server-Timing`` header value: one entry per derived duration."""
        parts = []
        for name, (begin, end) in DURATIONS.items():
            value = self.duration_ms(begin, end)
            if value is not None:
                parts.append(f"{name};dur={value}")
        return ", ".join(parts)
