"""A customer-service traffic profile and the demand it makes at peak.

Two ways in. Daily volume (open loop): turns a second at peak = daily conversations x
turns per conversation x peak-hour share / 3600 s x burst factor, where the default
share, 1/24, is an hour no busier than the day's average, so the burst factor alone makes
the peak (promotions bring 5-10x). Or concurrent chats at peak (closed loop): each chat
sends a message, waits for the whole reply, then reads and types for the think time.
Headroom: the plan carries demand / (1 - headroom), so the peak uses at most
1 - headroom of what is bought.
"""

from __future__ import annotations

from dataclasses import dataclass

from kefu.plan import PlanError


@dataclass(frozen=True, slots=True)
class Traffic:
    tokens_in: float  # prompt tokens of a turn: persona, passages, history, message
    tokens_out: float
    daily_conversations: float | None = None
    turns: float = 4.0
    peak_hour_share: float = 1 / 24
    burst: float = 5.0
    concurrent_chats: float | None = None
    think_s: float = 20.0
    headroom: float = 0.3

    def __post_init__(self) -> None:
        if (self.daily_conversations is None) == (self.concurrent_chats is None):
            raise PlanError("give one of --daily-conversations or --concurrent-chats")
        positive = {
            "--tokens-in": self.tokens_in,
            "--tokens-out": self.tokens_out,
            "--turns": self.turns,
            "--burst": self.burst,
            "--daily-conversations": self.daily_conversations,
            "--concurrent-chats": self.concurrent_chats,
        }
        for flag, value in positive.items():
            if value is not None and not value > 0:
                raise PlanError(f"{flag} must be > 0, not {value:g}")
        if not 0 < self.peak_hour_share <= 1:
            raise PlanError(f"--peak-hour-share must be in (0, 1], not {self.peak_hour_share:g}")
        if not 0 <= self.headroom < 1:
            raise PlanError(f"--headroom must be in [0, 1), not {self.headroom:g}")
        if self.think_s < 0:
            raise PlanError(f"--think must be >= 0, not {self.think_s:g}")

    @property
    def closed_loop(self) -> bool:
        return self.concurrent_chats is not None

    def peak_turns_per_s(self) -> float:
        """Open loop: turns a second at peak, before headroom."""
        assert self.daily_conversations is not None
        turns_per_hour = self.daily_conversations * self.turns * self.peak_hour_share
        return turns_per_hour / 3600 * self.burst

    def planned_demand(self) -> float:
        """What the plan must carry: turns/s (open loop) or chats (closed), with headroom."""
        base = self.concurrent_chats if self.closed_loop else self.peak_turns_per_s()
        assert base is not None
        return base / (1 - self.headroom)

    @property
    def demand_unit(self) -> str:
        return "chats" if self.closed_loop else "turns/s"
