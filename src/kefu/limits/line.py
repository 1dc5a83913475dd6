"""Admission's line: the requests waiting for a slot, first come first served, each with
when it gives up (``admission.py`` decides how long; this holds the waiting)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kefu.limits.holds import Judgement, Place


class Gone(Exception):
    """The wait ran out before a slot was handed over."""


class Line:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._places: dict[asyncio.Future[None], Place] = {}

    def __bool__(self) -> bool:
        return bool(self._places)

    def _waiting(self) -> list[Place]:
        return [place for waiter, place in self._places.items() if not waiter.done()]

    @property
    def waiting(self) -> int:
        return len(self._waiting())

    def gives_up(self) -> list[float]:
        """When each request still waiting gives up, in line order (admission's clock)."""
        return [place.gives_up for place in self._waiting()]

    def judgements(self) -> list[Judgement | None]:
        return [place.judgement for place in self._waiting()]

    async def wait(
        self, limit: float, judgement: Judgement | None, unused: Callable[[], None]
    ) -> None:
        """Wait at the back for a slot (``hand_over``) at most ``limit`` seconds; raises
        ``Gone`` where none came. A wait cancelled as its slot came calls ``unused``."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._places[waiter] = Place(self.clock() + limit, judgement)
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that arrives with the slot, and a request whose client left would still run.
            async with asyncio.timeout(limit):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return  # the slot arrived as the timer fired: keep it
            raise Gone from None
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                unused()  # handed a slot it will not use
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            self._places.pop(waiter, None)

    def hand_over(self) -> bool:
        """Give a freed slot to the first still waiting; False where nobody is."""
        while self._places:
            waiter = next(iter(self._places))
            del self._places[waiter]
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False
