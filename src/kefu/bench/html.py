"""``report.html``: the run's tables and its plots (referenced beside it) on one page."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from kefu.bench.plots import CDF_PNG, LATENCY_PNG, TURN_PNG
from kefu.bench.report import (
    console_report,
    knee_text,
    latency_rows,
    split_rows,
    throughput_rows,
)
from kefu.bench.runner import BenchResult

REPORT_FILE = "report.html"

CAPTIONS = {
    LATENCY_PNG: "Latency (TTFT and E2E, p50 and p99) and throughput against load; the "
    "dotted red line is the knee, the wide blue band the TTFT SLO.",
    CDF_PNG: "TTFT distribution per answer tier, one line per load level.",
    TURN_PNG: "TTFT p50 and p99 by turn number within a session, one line per load level.",
}

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-variant-numeric: tabular-nums; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #ddd; text-align: right; }
th { background: #f4f4f4; }
td.key, th.key { text-align: left; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f8f8f8; padding: 1em; overflow-x: auto; }
.knee { font-weight: 600; }
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    def cells(tag: str, values: Sequence[str]) -> str:
        return "".join(
            f"<{tag}{' class=key' if i < left else ''}>{escape(v)}</{tag}>"
            for i, v in enumerate(values)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    return f"<table><thead><tr>{cells('th', headers)}</tr></thead><tbody>{body}</tbody></table>"


def render_html(result: BenchResult, images: Sequence[str]) -> str:
    target = result.target
    head = console_report(result).split("\n\n", 1)[0]
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>kefu bench: {escape(target.endpoint)}</title><style>{STYLE}</style></head><body>",
        f"<h1>kefu bench: {escape(target.endpoint)}</h1>",
        f"<pre>{escape(head)}</pre>",
    ]
    if result.knee is not None:
        knee = knee_text(result.knee, result.levels)
        parts.append(f'<p class="knee">{escape(knee).replace(chr(10), "<br>")}</p>')
    parts += ["<h2>Throughput</h2>", _table(*throughput_rows(result))]
    parts += ["<h2>Latency (ms, successful requests)</h2>", _table(*latency_rows(result))]
    parts += ["<h2>By answer tier</h2>", _table(*split_rows(result, "tier"), left=2)]
    parts += ["<h2>By turn number</h2>", _table(*split_rows(result, "turn"), left=2)]
    parts.append("<h2>Plots</h2>")
    for name in images:
        caption = escape(CAPTIONS.get(name, name))
        parts.append(
            f'<figure><img src="{escape(name)}" alt="{caption}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    parts.append(
        "<p>Files: <a href=summary.json>summary.json</a> (this summary), "
        "<a href=requests.jsonl>requests.jsonl</a> (one request a line, raw timestamps).</p>"
    )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_html(result: BenchResult, out: Path, images: Sequence[Path]) -> Path:
    """The report beside its images, which it references by file name."""
    path = out / REPORT_FILE
    path.write_text(render_html(result, [p.name for p in images]), encoding="utf-8")
    return path
