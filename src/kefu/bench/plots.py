"""PNG plots of a run (matplotlib, Agg backend; imported only when plots are written).

- ``latency_vs_load.png``: TTFT and E2E p50/p99 against load (left), request throughput
  and goodput against load (right); the SLO and the knee are marked.
- ``ttft_cdf_by_tier.png``: the distribution of TTFT, one panel per answer tier, one line
  per load level.
- ``ttft_by_turn.png``: TTFT p50 and p99 by turn number within the session, one line per level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kefu.bench.metrics import tier_of, ttft
from kefu.bench.runner import BenchResult, LevelResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

LATENCY_PNG = "latency_vs_load.png"
CDF_PNG = "ttft_cdf_by_tier.png"
TURN_PNG = "ttft_by_turn.png"
PNGS = (LATENCY_PNG, CDF_PNG, TURN_PNG)
DPI = 110


def _figure(panels: int) -> tuple[Figure, list[Axes]]:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    from matplotlib.figure import Figure

    # A Figure without pyplot: no global state, nothing to close.
    figure = Figure(figsize=(5.2 * panels, 4.2), layout="constrained")
    axes = [figure.add_subplot(1, panels, i + 1) for i in range(panels)]
    return figure, axes


def _finite(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if math.isfinite(y) and y > 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _colors(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.85 * i / max(1, n - 1)) for i in range(n)]


def _legend(ax: Axes, **kwargs: object) -> None:
    if ax.get_legend_handles_labels()[0]:  # an empty legend is a matplotlib warning
        ax.legend(**kwargs)


def _unit(result: BenchResult) -> str:
    return "users" if result.config.mode == "users" else "sessions per second"


def _load_axis(ax: Axes, result: BenchResult) -> None:
    loads = [lv.plan.load for lv in result.levels]
    if len(loads) > 1 and min(loads) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(loads, [f"{x:g}" for x in loads])
    ax.minorticks_off()
    ax.set_xlabel(_unit(result))
    if result.knee is not None and result.knee.load is not None:
        label = "knee" if result.knee.status == "found" else "knee >= (not reached)"
        ax.axvline(result.knee.load, color="tab:red", linestyle=":", label=label)


def latency_vs_load(result: BenchResult, path: Path) -> None:
    figure, (lat, thr) = _figure(2)
    loads = [lv.plan.load for lv in result.levels]
    series = (
        ("ttft", "p50", "tab:blue", "-"),
        ("ttft", "p99", "tab:blue", "--"),
        ("e2e", "p50", "tab:orange", "-"),
        ("e2e", "p99", "tab:orange", "--"),
    )
    plotted = False
    for metric, stat, color, style in series:
        values = [getattr(getattr(lv.summary, metric), stat) * 1000 for lv in result.levels]
        xs, ys = _finite(loads, values)
        label = f"{metric.upper()} {stat}"
        lat.plot(xs, ys, marker="o", color=color, linestyle=style, label=label)
        plotted = plotted or bool(ys)
    if (bound := result.config.slo.ttft) is not None:
        lat.axhline(bound * 1000, color="tab:blue", alpha=0.4, linewidth=4, label="TTFT SLO")
    if plotted:
        lat.set_yscale("log")
    lat.set_ylabel("latency (ms)")
    lat.set_title("Latency against load")
    _load_axis(lat, result)
    _legend(lat, fontsize="small")
    for name, values, color, style, marker in (
        (
            "requests/s",
            [lv.summary.request_throughput for lv in result.levels],
            "tab:green",
            "-",
            "o",
        ),
        (
            "goodput/s (SLO met)",
            [lv.summary.goodput for lv in result.levels],
            "tab:purple",
            "--",
            "s",
        ),
    ):
        xs, ys = _finite(loads, values)
        thr.plot(xs, ys, marker=marker, color=color, linestyle=style, label=name)
    thr.set_ylim(bottom=0)
    thr.set_ylabel("requests per second")
    tokens = thr.twinx()  # tokens/s on its own scale: replies differ in length between runs
    xs, ys = _finite(loads, [lv.summary.token_throughput for lv in result.levels])
    tokens.plot(xs, ys, marker=".", color="grey", alpha=0.6, label="tokens/s (right)")
    tokens.set_ylim(bottom=0)
    tokens.set_ylabel("tokens per second", color="grey")
    handles, labels = tokens.get_legend_handles_labels()
    thr.set_title("Throughput against load")
    _load_axis(thr, result)
    mine, names = thr.get_legend_handles_labels()
    thr.legend(mine + handles, names + labels, fontsize="small", loc="lower right")
    figure.savefig(path, dpi=DPI)


def _cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    ordered = sorted(values)
    return ordered, [(i + 1) / len(ordered) for i in range(len(ordered))]


def ttft_cdf_by_tier(result: BenchResult, path: Path) -> None:
    tiers = sorted({tier_of(r) for lv in result.levels for r in lv.records if r.ok}) or ["-"]
    figure, axes = _figure(min(len(tiers), 3))
    colors = _colors(len(result.levels))
    for ax, tier in zip(axes, tiers, strict=False):
        plotted = False
        for lv, color in zip(result.levels, colors, strict=True):
            values = [
                v * 1000
                for r in lv.records
                if tier_of(r) == tier and (v := ttft(r)) is not None and v > 0
            ]
            if values:
                xs, ys = _cdf(values)
                ax.step(xs, ys, where="post", color=color, label=lv.plan.label)
                plotted = True
        if (bound := result.config.slo.ttft) is not None:
            ax.axvline(bound * 1000, color="tab:red", linestyle=":", label="TTFT SLO")
        if plotted:
            ax.set_xscale("log")
        else:
            ax.text(0.5, 0.5, "no successful replies", ha="center", transform=ax.transAxes)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("TTFT (ms)")
        ax.set_ylabel("share of requests at or below")
        ax.set_title(f"TTFT CDF, tier {tier}")
        ax.grid(alpha=0.3)
        _legend(ax, fontsize="small", loc="lower right")
    figure.savefig(path, dpi=DPI)


def _by_turn(lv: LevelResult, which: str) -> tuple[list[float], list[float]]:
    turns = sorted(lv.by_turn)
    values = [getattr(lv.by_turn[t].ttft, which) * 1000 for t in turns]
    return _finite([float(t) for t in turns], values)


def ttft_by_turn(result: BenchResult, path: Path) -> None:
    figure, axes = _figure(2)
    colors = _colors(len(result.levels))
    turns = sorted({t for lv in result.levels for t in lv.by_turn})
    for ax, which in zip(axes, ("p50", "p99"), strict=True):
        plotted = False
        for lv, color in zip(result.levels, colors, strict=True):
            xs, ys = _by_turn(lv, which)
            ax.plot(xs, ys, marker="o", color=color, label=lv.plan.label)
            plotted = plotted or bool(ys)
        if which == "p99" and (bound := result.config.slo.ttft) is not None:
            ax.axhline(bound * 1000, color="tab:red", linestyle=":", label="TTFT SLO")
        if plotted:
            ax.set_yscale("log")
        ax.set_xticks(turns, [str(t) for t in turns])
        ax.minorticks_off()
        ax.set_xlabel("turn number in the session")
        ax.set_ylabel(f"TTFT {which} (ms)")
        ax.set_title(f"TTFT {which} by turn")
        ax.grid(alpha=0.3)
        _legend(ax, fontsize="small")
    figure.savefig(path, dpi=DPI)


def write_plots(result: BenchResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in PNGS]
    latency_vs_load(result, paths[0])
    ttft_cdf_by_tier(result, paths[1])
    ttft_by_turn(result, paths[2])
    return paths
