"""The live progress bar on stderr, and a line per finished level.

On a terminal the bar is redrawn in place; elsewhere (a pipe, CI) only the level lines
are printed, so logs stay readable.
"""

from __future__ import annotations

import sys
from typing import TextIO

from kefu.bench.load import LevelPlan, LevelState
from kefu.bench.runner import LevelResult
from kefu.bench.tables import ms, num

WIDTH = 24


class ProgressBar:
    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._drawn = False

    def level_started(self, plan: LevelPlan) -> None:
        self._drawn = False

    def tick(self, state: LevelState, now: float) -> None:
        if not self.live:
            return
        plan = state.plan
        elapsed = max(0.0, now - state.started)
        # Whichever bound comes first ends the level, so the bar shows the nearer one.
        done = max(state.sent / plan.requests, min(1.0, elapsed / plan.duration))
        filled = round(done * WIDTH)
        bar = "#" * filled + "." * (WIDTH - filled)
        line = (
            f"{plan.label:>16} [{bar}] {state.sent}/{plan.requests} sent, "
            f"{state.in_flight} in flight, {state.failed} failed, {elapsed:.0f}/{plan.duration:g} s"
        )
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()
        self._drawn = True

    def level_done(self, result: LevelResult) -> None:
        s = result.summary
        if self._drawn:
            self.stream.write("\r\x1b[2K")
        failed = s.errors + s.timeouts
        self.stream.write(
            f"{result.plan.label:>16}: {s.requests} requests, {failed} failed, "
            f"{num(s.request_throughput)} req/s, TTFT p99 {ms(s.ttft.p99)} ms, "
            f"E2E p50 {ms(s.e2e.p50)} ms, SLO {'met' if result.meets_slo else 'missed'}\n"
        )
        self.stream.flush()
        self._drawn = False
