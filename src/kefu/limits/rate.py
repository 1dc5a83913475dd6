"""A rate as operators write it: ``N/SECONDS`` (30/60: thirty requests a minute)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rate:
    requests: int
    seconds: float

    @classmethod
    def parse(cls, text: str) -> Rate | None:
        """None for 'off'; a ValueError that says what is wrong otherwise."""
        text = text.strip()
        if text.lower() == "off":
            return None
        count, sep, period = text.partition("/")
        try:
            requests, seconds = int(count), float(period)
        except ValueError:
            requests, seconds = 0, 0.0
        if not sep or requests < 1 or seconds <= 0:
            raise ValueError(f"{text!r} is not N/SECONDS with N >= 1 (e.g. 30/60), nor 'off'")
        return cls(requests, seconds)

    def __str__(self) -> str:
        return f"{self.requests}/{self.seconds:g}"
