"""Plain-text tables and number formats shared by the console report and ``compare``."""

from __future__ import annotations

import math
from collections.abc import Sequence


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds: one decimal below 10 ms, whole above; '-' for none."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if math.isinf(seconds):
        return "inf"
    value = seconds * 1000
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def num(value: float | None, digits: int = 2) -> str:
    if value is None or math.isnan(value):
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value * 100:.1f}%"


def load_text(value: float) -> str:
    return f"{value:g}"


def render(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A fixed-width table; the first ``left`` columns are left-aligned, the rest right."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])
