"""Keeping the FAQ decision fitted to the knowledge base and its labels, in the
background.

After the knowledge base changes (an import, a removal, a reviewed miss, a file the
``kefu kb`` commands wrote) or new verdicts came from traffic, once the second look has
embedded the new questions, the labels (``faq/labels.py``) go through both looks in small
chunks: their e5 passes on the second look's thread, their searches under the
knowledge-base lock, a chunk at a time, so customers' messages are served between
chunks; ``faq/fit.py`` turns what they found into the model. From the first message on a
model decides: the last one fitted, or before any, the shipped prior at its conservative
threshold. ``kefu kb calibrate`` writes the same file; the server reads it when it
changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from kefu.faq.fit import Candidate, Scored, fit, judged
from kefu.faq.labels import Label
from kefu.faq.model import Model
from kefu.knowledge.embedder import Vectors

log = logging.getLogger("kefu.fastpath")

T = TypeVar("T")
# Labels searched per turn of the knowledge-base lock: a few milliseconds, so a
# customer's lookup never waits long behind the calibration.
CHUNK = 16

# The fast path's own ways to work: a function under the knowledge-base lock, and an
# e5 pass on the second look's thread (None when the second look is off).
UnderLock = Callable[[Callable[[], T]], Awaitable[T]]
Embed = Callable[[Sequence[str]], Awaitable[Vectors]]
Observing = Callable[[Label, Vectors | None], list[Candidate]]
# What the model would be fitted to now: its fingerprint and its labels.
Current = Callable[[], Awaitable[tuple[str, list[Label]]]]
Observe = Callable[[list[Label]], Awaitable[list[list[Scored]]]]


class Seen:
    """Each label's candidates, kept until the knowledge base changes: a fit after new
    verdicts runs only the new labels through the looks."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, frozenset[str]], list[Candidate]] = {}

    def forget(self) -> None:
        self._found.clear()

    async def scored(
        self,
        labels: Sequence[Label],
        *,
        under_lock: UnderLock[list[list[Candidate]]],
        embed: Embed | None,
        observing: Observing,
    ) -> list[list[Scored]]:
        todo = list({(label.text, label.excluded): label for label in labels}.values())
        todo = [label for label in todo if (label.text, label.excluded) not in self._found]
        found = await observe_all(todo, under_lock=under_lock, embed=embed, observing=observing)
        for label, seen in zip(todo, found, strict=True):
            self._found[(label.text, label.excluded)] = seen
        return [judged(label, self._found[(label.text, label.excluded)]) for label in labels]


class Keeper:
    """The model in use, and the background fitting of the next one."""

    def __init__(
        self, path: Path, target: float, judge_error: float = 0.0, *, seed: Path | None = None
    ) -> None:
        """``seed``: a model fitted at build time (the demo's, by ``scripts/calibrate-demo``),
        used when it was fitted to this knowledge base: a first start decides on its labels."""
        self.path = path
        self.seed = seed
        self.target = target
        self.judge_error = judge_error
        self.model = Model.prior_only(target)
        self.fitted = False  # whether ``model`` was fitted to this data dir
        self.stale = True  # the knowledge base or its labels changed since the fit
        self._task: asyncio.Task[None] | None = None
        self._mtime: float | None = None

    def open(self, fingerprint: str) -> None:
        """Use the stored model (or the seed) when it was fitted to this state."""
        self._read()
        if self.model.fingerprint != fingerprint and self.seed is not None:
            seed = Model.load(self.seed)
            if seed is not None and seed.fingerprint == fingerprint and seed.target == self.target:
                seed.save(self.path)
                self._read()

    def _read(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return
        if mtime != self._mtime:
            self._mtime = mtime
            loaded = Model.load(self.path)
            if loaded is not None and loaded.target == self.target:
                self.model, self.fitted = loaded, True

    def follow(self, current: Current, observing: Observe) -> None:
        """Each refresh round: pick up a file ``kefu kb calibrate`` wrote, and start
        fitting in the background when the knowledge base or its labels changed."""
        if self._task is not None and not self._task.done():
            return
        self._read()
        if self.stale:
            self.stale = False  # a change while fitting marks it stale again
            self._task = asyncio.create_task(self._fit_in_background(current, observing))

    async def _fit_in_background(
        self,
        current: Current,
        observing: Observe,
    ) -> None:
        fingerprint, labels = await current()
        fitted_to = (self.model.fingerprint, self.model.judge_error)
        if self.fitted and fitted_to == (fingerprint, self.judge_error):
            return
        try:
            scored = await observing(labels)
        except Exception:
            self.stale = True
            log.exception("fitting the fast path's decision failed")
            return
        model = fit(labels, scored, self.target, fingerprint, self.judge_error)
        self.model, self.fitted = model, True
        model.save(self.path)
        self._mtime = self.path.stat().st_mtime
        point = model.point
        log.info(
            "fast path fitted: serves at P(right) >= %.3f (%s; %d of %d labelled right there, "
            "precision >= %.3f)",
            point.threshold,
            point.source,
            point.right,
            point.labelled,
            point.bound,
        )

    @property
    def fitting(self) -> bool:
        return self._task is not None and not self._task.done()

    async def settled(self) -> None:
        """Wait for the fit under way, if any (tests, ``kb_quality.py``)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def status(self) -> dict[str, object]:
        """For ``/ready``: what serves, and whether a fit is under way."""
        state = "fitting" if self.fitting else ("fitted" if self.fitted else "prior")
        return {"state": state, **self.model.summary()}


async def observe_all(
    labels: Sequence[Label],
    *,
    under_lock: UnderLock[list[list[Candidate]]],
    embed: Embed | None,
    observing: Observing,
) -> list[list[Candidate]]:
    """Every label through both looks: the e5 passes of a chunk, then its searches under
    the lock, chunk by chunk."""
    scored: list[list[Candidate]] = []
    for start in range(0, len(labels), CHUNK):
        chunk = labels[start : start + CHUNK]
        vectors = None if embed is None else await embed([label.text for label in chunk])

        def run(
            chunk: Sequence[Label] = chunk, vectors: Vectors | None = vectors
        ) -> list[list[Candidate]]:
            return [
                observing(label, None if vectors is None else vectors[i])
                for i, label in enumerate(chunk)
            ]

        scored += await under_lock(run)
    return scored
