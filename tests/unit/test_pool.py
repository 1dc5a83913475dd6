"""The pool's choice, failover and breakers, with scripted engines in place of upstreams."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from kefu.engine.base import (
    ChatMessage,
    EngineTimings,
    Finished,
    GenerationEvent,
    GenerationRequest,
    TokenDelta,
    Usage,
)
from kefu.engine.pool import EnginePool
from kefu.engine.remote import RemoteEngine, Upstream
from kefu.errors import EngineUnavailable, FirstTokenTimeout, UpstreamError

pytestmark = pytest.mark.anyio


class ScriptedEngine(RemoteEngine):
    """A remote engine that fails as told instead of calling anyone."""

    def __init__(self, name: str) -> None:
        super().__init__(
            Upstream(f"http://{name}.invalid/v1", model="m", name=name),
            context_window=2048,
            connections=4,
            first_token_timeout=1.0,
            timeout=10.0,
        )
        self.fail: type[UpstreamError] | None = None
        self.break_after_first = False
        self.up = True
        self.served = 0

    async def discover(self) -> bool:
        return self.up

    async def healthy(self) -> bool:
        return self.up

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        if self.fail is not None:
            raise self.fail(f"engine {self.name} failed")
        self.in_flight += 1
        try:
            yield TokenDelta(f"from {self.name}")
            if self.break_after_first:
                raise UpstreamError(f"engine {self.name} broke off", started=True)
            self.served += 1
            now = 1.0
            yield Finished("stop", Usage(3, 1), EngineTimings(now, now, now + 0.05, now + 0.05))
        finally:
            self.in_flight -= 1


@pytest.fixture
async def engines() -> AsyncIterator[list[ScriptedEngine]]:
    made = [ScriptedEngine("a"), ScriptedEngine("b")]
    yield made
    for engine in made:
        await engine.close()


def pool_of(engines: list[ScriptedEngine], routing: str = "affinity") -> EnginePool:
    return EnginePool(
        engines,
        routing=routing,  # type: ignore[arg-type]
        imbalance=4,
        failures=2,
        cooldown=0.0,
        check_interval=60,
    )


def request(key: str) -> GenerationRequest:
    return GenerationRequest([ChatMessage("user", "hi")], routing_key=key)


async def reply(pool: EnginePool, key: str) -> tuple[str, Finished]:
    text, finished = "", None
    async for event in pool.generate(request(key)):
        if isinstance(event, TokenDelta):
            text += event.text
        else:
            finished = event
    assert finished is not None
    return text, finished


async def engine_of(pool: EnginePool, key: str) -> str:
    routed = (await reply(pool, key))[1].routed
    assert routed is not None
    return routed.engine


async def test_a_session_stays_on_one_engine(engines: list[ScriptedEngine]) -> None:
    pool = pool_of(engines)
    homes = {(await reply(pool, "session-1"))[0] for _ in range(5)}
    assert len(homes) == 1
    _, finished = await reply(pool, "session-1")
    assert finished.routed is not None
    assert finished.routed.reason == "affinity"
    assert finished.routed.attempts == 1


async def test_failure_before_the_first_token_goes_to_another_engine(
    engines: list[ScriptedEngine],
) -> None:
    pool = pool_of(engines)
    home = (await reply(pool, "k"))[1].routed
    assert home is not None
    failing = next(e for e in engines if e.name == home.engine)
    failing.fail = UpstreamError
    text, finished = await reply(pool, "k")
    assert finished.routed is not None
    assert finished.routed.engine != failing.name
    assert finished.routed.attempts == 2
    assert f"after {failing.name} failed" in finished.routed.reason
    assert text == f"from {finished.routed.engine}"
    await reply(pool, "k")  # the second failure in a row trips it
    row = next(r for r in pool.stats().engines if r.name == failing.name)
    assert (row.breaker, row.failures) == ("open", 2)
    # Tripped, it is not even tried: the next reply is the other engine's at once.
    routed = (await reply(pool, "k"))[1].routed
    assert routed is not None
    assert routed.attempts == 1


async def test_failure_after_text_went_out_is_not_retried(engines: list[ScriptedEngine]) -> None:
    pool = pool_of(engines, routing="round-robin")
    for engine in engines:
        engine.break_after_first = True
    received: list[GenerationEvent] = []

    async def read() -> None:
        async for event in pool.generate(request("k")):
            received.append(event)

    with pytest.raises(UpstreamError) as info:
        await read()
    assert len(received) == 1
    assert info.value.started
    assert info.value.engine in {"a", "b"}
    assert sum(e.served for e in engines) == 0


async def test_all_engines_down_is_a_fast_unavailable(engines: list[ScriptedEngine]) -> None:
    pool = pool_of(engines)
    for engine in engines:
        engine.fail = FirstTokenTimeout
    with pytest.raises(EngineUnavailable, match="no engine failed"):
        await reply(pool, "k")
    assert [r.timeouts for r in pool.stats().engines] == [1, 1]
    with pytest.raises(EngineUnavailable):
        await reply(pool, "k")
    assert {r.breaker for r in pool.stats().engines} == {"open"}
    with pytest.raises(EngineUnavailable, match="can take requests") as info:
        await reply(pool, "k")
    assert info.value.retry_after >= 0


async def test_checks_trip_a_dead_engine_and_let_it_back(engines: list[ScriptedEngine]) -> None:
    pool = pool_of(engines)
    dead = engines[0]
    dead.up = False
    for _ in range(2):
        await pool._check(pool.members[0])
    assert pool.stats().engines[0].breaker == "open"
    served_by = [await engine_of(pool, f"s{i}") for i in range(10)]
    assert set(served_by) == {"b"}
    dead.up = True
    await pool._check(pool.members[0])
    assert pool.stats().engines[0].breaker == "half-open"
    # The trial: a key whose home is the recovered engine closes its breaker.
    served_by = [await engine_of(pool, f"s{i}") for i in range(20)]
    assert "a" in served_by
    assert pool.members[0].breaker.state == "closed"


async def test_the_load_override_sends_a_busy_home_elsewhere(
    engines: list[ScriptedEngine],
) -> None:
    pool = pool_of(engines)
    home = (await reply(pool, "k"))[1].routed
    assert home is not None
    busy = next(m for m in pool.members if m.name == home.engine)
    busy.engine.in_flight = 10  # as if ten replies were streaming from it
    _, finished = await reply(pool, "k")
    assert finished.routed is not None
    assert finished.routed.engine != home.engine
    assert finished.routed.reason.startswith("least-load")
