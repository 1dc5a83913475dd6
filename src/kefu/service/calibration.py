"""The calibrated decision in the server: keeping it fitted to the knowledge base in
the background, and applying it to a message's looks.

After the knowledge base changes (an import, a removal, a file the ``kefu kb``
commands wrote), once the second look has embedded the new questions, the probes
(``calibration/probes.py``) go through both looks in small chunks: their e5 passes on
the second look's thread, their searches under the knowledge-base lock, a chunk at a
time, so customers' messages are served between chunks; they measure the shipped
prior's decision on this knowledge base (``calibration/fit.py``). Until the first
calibration of a data dir is done, the router's fixed thresholds decide; after a change, the
last calibration decides until the next is ready. ``kefu kb calibrate`` writes the
same file; the server reads it when it changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from kefu.calibration.fit import Observation, fit
from kefu.calibration.model import Calibration
from kefu.calibration.probes import Probe, fingerprint, make_probes
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry

log = logging.getLogger("kefu.fastpath")

T = TypeVar("T")
# Probes searched per turn of the knowledge-base lock: a few milliseconds, so a
# customer's lookup never waits long behind the calibration.
CHUNK = 16

# The fast path's own ways to work: a function under the knowledge-base lock, and an
# e5 pass on the second look's thread (None when the second look is off).
UnderLock = Callable[[Callable[[], T]], Awaitable[T]]
Embed = Callable[[Sequence[str]], Awaitable[Vectors]]
Probing = Callable[[Probe, Vectors | None], Observation]


# The demo knowledge base's calibration at the default precision, fitted at build time
# (``kefu kb calibrate`` on a data dir holding the demo): a newcomer's first start has
# the calibrated decision at once instead of after a minute of a core.
DEMO_CALIBRATION = Path(__file__).parent.parent / "knowledge" / "static" / "demo_calibration.json"


class Keeper:
    """The calibration in use, and the background fitting of the next one."""

    def __init__(self, path: Path, target: float) -> None:
        self.path = path
        self.target = target
        self.calibration: Calibration | None = None
        self.stale = True
        self._task: asyncio.Task[None] | None = None
        self._mtime: float | None = None

    def open(self, entries: Sequence[KbEntry]) -> None:
        """Use the stored calibration when it was fitted to these entries at this target."""
        self._read()
        current = self.calibration
        prints = fingerprint(entries)
        if current is None or current.fingerprint != prints:
            demo = Calibration.load(DEMO_CALIBRATION)
            if demo is not None and demo.fingerprint == prints and demo.target == self.target:
                demo.save(self.path)
                self._read()
                current = self.calibration
        self.stale = current is None or current.fingerprint != prints
        if current is not None and current.target != self.target:
            self.calibration, self.stale = None, True

    def _read(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return
        if mtime != self._mtime:
            self._mtime = mtime
            loaded = Calibration.load(self.path)
            if loaded is not None and loaded.target == self.target:
                self.calibration = loaded

    def follow(
        self,
        entries_now: Callable[[], Awaitable[list[KbEntry]]],
        start: Callable[[], Awaitable[Calibration]],
    ) -> None:
        """Each refresh round: pick up a file ``kefu kb calibrate`` wrote, and start
        fitting in the background when the knowledge base changed since the last fit."""
        if self._task is not None and not self._task.done():
            return
        self._read()
        if self.stale:
            self._task = asyncio.create_task(self._fit_in_background(entries_now, start))

    async def _fit_in_background(
        self,
        entries_now: Callable[[], Awaitable[list[KbEntry]]],
        start: Callable[[], Awaitable[Calibration]],
    ) -> None:
        current = self.calibration
        if current is not None and current.fingerprint == fingerprint(await entries_now()):
            self.stale = False  # the file ``kefu kb calibrate`` wrote is already this one
            return
        try:
            self.stale = False  # a change while fitting marks it stale again
            calibration = await start()
        except Exception:
            self.stale = True
            log.exception("calibrating the fast path's decision failed")
            return
        self.calibration = calibration
        calibration.save(self.path)
        self._mtime = self.path.stat().st_mtime
        point = calibration.point
        log.info(
            "fast path calibrated: expected precision %.3f, coverage %.3f (target %.2f)",
            point.precision,
            point.coverage,
            calibration.target,
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def status(self, enabled: bool) -> dict[str, object]:
        """For ``/ready``: the operating point, and whether a fit is under way."""
        if not enabled:
            return {"state": "off"}
        running = self._task is not None and not self._task.done()
        out: dict[str, object] = {"state": "calibrating" if running or self.stale else "calibrated"}
        if self.calibration is not None:
            out.update(self.calibration.summary())
        return out


async def calibrate(
    entries: Sequence[KbEntry],
    target: float,
    *,
    under_lock: UnderLock[list[Observation]],
    embed: Embed | None,
    probing: Probing,
) -> Calibration:
    """Fit the decision to ``entries``: the e5 passes of a chunk of probes, then their
    searches under the lock, chunk by chunk."""
    probes = make_probes(entries)
    observations: list[Observation] = []
    for start in range(0, len(probes), CHUNK):
        chunk = probes[start : start + CHUNK]
        vectors = None if embed is None else await embed([probe.text for probe in chunk])

        def run(chunk: list[Probe] = chunk, vectors: Vectors | None = vectors) -> list[Observation]:
            return [
                probing(probe, None if vectors is None else vectors[i])
                for i, probe in enumerate(chunk)
            ]

        observations += await under_lock(run)
    return fit(observations, target, fingerprint(entries))
