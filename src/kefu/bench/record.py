"""One request's raw facts: what was asked, and when each part of the answer arrived.

Every metric in ``kefu.bench.metrics`` is derived from these fields and nothing else.
Times are seconds on the bench's own monotonic clock (``time.perf_counter()``), counted
from the start of the run, so a JSONL file of records can be re-analysed later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "error", "timeout"]


@dataclass(slots=True)
class RequestRecord:
    """One request of a run.

    ``sent``: just before the request was handed to the HTTP client.
    ``first_byte``: the response's status line and headers arrived.
    ``first_content``: the first event carrying non-empty reply text was read.
    ``chunks``: the arrival of every event carrying non-empty reply text (the first included).
    ``end``: the response body ended, or the request failed or timed out.
    """

    level: int  # index of the load level within the run
    load: float  # that level's users, or sessions per second
    session: int  # index of the simulated customer session
    turn: int  # 1 for a session's first message
    kind: str  # faq | unique | order
    sent: float
    end: float
    first_byte: float | None = None
    first_content: float | None = None
    chunks: list[float] = field(default_factory=list)
    status: Status = "ok"
    error: str | None = None
    http_status: int | None = None
    tier: str | None = None  # kefu's done event says how the answer was made; None elsewhere
    completion_tokens: int | None = None  # as the server reported them in its usage
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    reply_chars: int = 0
    server_timings: dict[str, float] | None = None  # kefu's done event: its own view

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        # Microseconds are finer than anything measured here; rounding keeps files small.
        for key in ("sent", "end", "first_byte", "first_content"):
            if data[key] is not None:
                data[key] = round(data[key], 6)
        data["chunks"] = [round(t, 6) for t in self.chunks]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestRecord:
        return cls(**data)
