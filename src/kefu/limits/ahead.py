"""What stands between a request and its first token besides its own prompt: the time it
already spent, the wait for a slot, and the prompts the engine reads before its own
(``Admission.judge`` adds the request's own reading; ``Admission.readable`` asks how long
a prompt the rest leaves room for)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kefu.limits.holds import Hold
from kefu.limits.rates import ServiceRate


@dataclass(frozen=True, slots=True)
class Ahead:
    spent: float  # seconds since the request came
    slot_wait: float  # until a slot frees for it (0 with one free)
    prompts: float  # reading the prompts before its own, at the measured speed
    # How much slower than the line says the engine reads its oldest unread prompt now: a
    # stalled engine is not described by its past.
    slowdown: float
    queued: bool  # no free slot, or prompts ahead still to read: evidence of a queue
    unread: int  # prompts let in and not read yet
    tickets: float  # prompts the tickets given before its own stand for
    waiting: int  # requests in line

    def __str__(self) -> str:
        return (
            f"{self.spent:.3f} s spent, {self.slot_wait:.3f} s slot wait, {self.prompts:.3f} s "
            f"ahead ({self.unread} unread, {self.tickets:.1f} tickets, {self.waiting} in line)"
        )

    @property
    def seconds(self) -> float:
        """Until the engine can begin on the request's own prompt."""
        return self.spent + max(self.slot_wait, self.prompts * self.slowdown)


def reading_since(granted: float, last_first_token: float | None) -> float:
    """When the engine began reading the prompt of a request let in at ``granted``: then,
    or when the prompt before it was read, whichever came later."""
    return granted if last_first_token is None else max(granted, last_first_token)


def ahead_of(
    rate: ServiceRate,
    *,
    now: float,
    spent: float,
    holds: Iterable[Hold],
    gives_up: Sequence[float],
    tickets: float,
    slot_free: bool,
    last_first_token: float | None,
) -> Ahead:
    """What waits before a request's own prompt, ``spent`` seconds after it came, with
    ``holds`` running, the line giving up at ``gives_up`` (first in line first), and
    ``tickets`` prompts given through the door before its own.

    Each running request frees its slot once the tokens its reply has still to send are
    sent; a freed slot goes to the first in line still waiting (``ServiceRate.slot_wait``).
    The prompts let in and not read yet, the tickets' and the line's are read one after
    another at the measured speed (a line in the prompt's tokens left to read), less what
    the engine has already spent on the oldest of them."""
    reading = rate.reading
    typical = reading.typical
    holds = list(holds)
    unread = [h for h in holds if h.first_token is None]
    prompts = sum(reading.seconds(typical if h.tokens is None else h.tokens) for h in unread)
    prompts += (tickets + len(gives_up)) * reading.seconds(typical)
    slowdown = 1.0
    if unread:
        oldest = min(unread, key=lambda h: h.granted)
        so_far = now - reading_since(oldest.granted, last_first_token)
        expected = reading.seconds(typical if oldest.tokens is None else oldest.tokens)
        prompts = max(0.0, prompts - so_far)
        if expected > 0 and so_far > expected:
            slowdown = so_far / expected
    slot_wait = 0.0
    if not slot_free:
        frees = [rate.frees_in(now - h.granted, h.emitted, h.limit) for h in holds]
        slot_wait = rate.slot_wait([at - now for at in gives_up], frees)
    return Ahead(
        spent=spent,
        slot_wait=slot_wait,
        prompts=prompts,
        slowdown=slowdown,
        queued=not slot_free or bool(unread) or tickets > 0,
        unread=len(unread),
        tickets=tickets,
        waiting=len(gives_up),
    )
