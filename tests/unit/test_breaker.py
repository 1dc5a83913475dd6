"""The circuit breaker's states, on a clock the test moves."""

from __future__ import annotations

from kefu.engine.breaker import Breaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def state(b: Breaker) -> str:
    """The state now (a plain read: mypy would keep an earlier assert's narrowing)."""
    return b.state


def breaker(clock: Clock) -> Breaker:
    return Breaker(failures=3, cooldown=5.0, clock=clock)


def test_opens_after_consecutive_failures_only() -> None:
    b = breaker(Clock())
    b.failed()
    b.failed()
    b.succeeded()  # a success in between resets the count
    b.failed()
    b.failed()
    assert state(b) == "closed"
    assert b.allows()
    b.failed()
    assert state(b) == "open"
    assert not b.allows()


def test_only_a_passing_check_after_the_cooldown_lets_one_trial_through() -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.failed()
    clock.now += 4.9
    b.health_passed()
    assert state(b) == "open"  # still resting
    clock.now += 0.2
    b.health_passed()
    assert state(b) == "half-open"
    assert b.allows()
    b.begin()
    assert not b.allows()  # one trial at a time
    b.succeeded()
    assert state(b) == "closed"
    assert b.allows()


def test_a_failed_trial_opens_again_and_rests_anew() -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.failed()
    clock.now += 5
    b.health_passed()
    b.begin()
    b.failed()
    assert state(b) == "open"
    clock.now += 4
    b.health_passed()
    assert state(b) == "open"


def test_failed_checks_trip_an_idle_engine_and_keep_it_resting() -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.health_failed()
    assert state(b) == "open"
    clock.now += 4
    b.health_failed()  # still down: the cooldown starts again
    clock.now += 4
    b.health_passed()
    assert state(b) == "open"
    clock.now += 1
    b.health_passed()
    assert state(b) == "half-open"


def test_an_abandoned_trial_frees_the_slot_without_a_verdict() -> None:
    clock = Clock()
    b = breaker(clock)
    b.start_open()
    b.health_passed()  # an engine that did not answer at start: the first pass lets it in
    assert state(b) == "half-open"
    b.begin()
    b.abandoned()
    assert state(b) == "half-open"
    assert b.allows()
