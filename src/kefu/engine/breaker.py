"""A circuit breaker per remote engine: closed, open, half-open.

Closed: requests flow; ``failures`` consecutive failures (refused, timed out, broken off,
a failed health check) open it. Open: no requests at all, so no customer waits on a dead
or hung engine. After ``cooldown`` seconds a *passing health check* makes it half-open:
one trial request may go through; its success closes the breaker, its failure opens it
again. Requests never probe an open engine themselves: with a hung engine, that probe
would cost a customer the whole first-token timeout every cooldown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

BreakerState = Literal["closed", "open", "half-open"]


class Breaker:
    def __init__(
        self, *, failures: int, cooldown: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = failures
        self.cooldown = cooldown
        self.clock = clock
        self.state: BreakerState = "closed"
        self.consecutive = 0
        self.opened_at = 0.0
        self.trial_running = False

    def allows(self) -> bool:
        """Whether a request may go to this engine now."""
        if self.state == "closed":
            return True
        return self.state == "half-open" and not self.trial_running

    def begin(self) -> None:
        """A request was sent; in half-open it is the one trial."""
        if self.state == "half-open":
            self.trial_running = True

    def succeeded(self) -> None:
        self.consecutive = 0
        self.trial_running = False
        self.state = "closed"

    def failed(self) -> None:
        self.trial_running = False
        self.consecutive += 1
        if self.state == "half-open" or self.consecutive >= self.threshold:
            self._open()

    def abandoned(self) -> None:
        """The trial request ended without a verdict (the client left): allow another."""
        self.trial_running = False

    def health_passed(self) -> None:
        if self.state == "open" and self.clock() - self.opened_at >= self.cooldown:
            self.state = "half-open"

    def health_failed(self) -> None:
        if self.state == "open":
            self.opened_at = self.clock()  # rest again from now
            return
        self.failed()

    def start_open(self) -> None:
        """An engine that did not answer at start: the first passing check lets it in."""
        self.state = "open"
        self.opened_at = self.clock() - self.cooldown

    def _open(self) -> None:
        self.state = "open"
        self.opened_at = self.clock()
