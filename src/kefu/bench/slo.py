"""Service-level objectives: ``--slo ttft=1s,e2e=5s`` parsed into bounds in seconds."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

METRICS = ("ttft", "tpot", "e2e")
_VALUE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$")


class SloError(ValueError):
    """A --slo string that cannot be read; the message says which part and why."""


@dataclass(frozen=True)
class Slo:
    """Upper bounds in seconds; None leaves that metric unbounded."""

    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None

    def bounds(self) -> dict[str, float]:
        return {m: v for m in METRICS if (v := getattr(self, m)) is not None}

    def __str__(self) -> str:
        parts = [f"{m}={format_seconds(v)}" for m, v in self.bounds().items()]
        return ",".join(parts) or "none"


def format_seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:g}ms"
    return f"{value:g}s"


def parse_slo(text: str) -> Slo:
    """``ttft=1s,tpot=50ms,e2e=5`` -> Slo; a bare number is seconds; '' or 'none' bounds nothing."""
    try:
        return _parse(text)
    except SloError as exc:
        raise SloError(f"--slo {text!r}: {exc}") from None


def _parse(text: str) -> Slo:
    if text.strip().lower() in ("", "none"):
        return Slo()
    bounds: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep:
            raise SloError(f"{part.strip()!r} is not METRIC=VALUE (e.g. ttft=1s)")
        if name not in METRICS:
            raise SloError(f"unknown metric {name!r}; use {', '.join(METRICS)}")
        if name in bounds:
            raise SloError(f"{name} is given twice")
        match = _VALUE.match(value)
        if match is None:
            raise SloError(f"{name}: {value.strip()!r} is not a duration such as 1s, 500ms or 0.5")
        seconds = float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)
        if not seconds > 0 or math.isinf(seconds):
            raise SloError(f"{name}: the bound must be a positive duration")
        bounds[name] = seconds
    return Slo(**bounds)
