"""Where state lives: SQLite in --data-dir and in-process limits, or Redis for replicas.

Chosen once at start-up from the settings; everything else sees the same
interfaces (SessionStore, SessionLocks, SessionEvents, KeyStore, Limiter).
"""

from __future__ import annotations

from dataclasses import dataclass

from kefu.auth.authenticate import Authenticator
from kefu.auth.keys import KeyStore, SqliteKeyStore
from kefu.auth.tokens import JwtVerifier
from kefu.limits.bucket import Limiter, LocalLimiter
from kefu.limits.rate import Rate
from kefu.observe.observer import Observer
from kefu.service.access import Access
from kefu.sessions.events import SessionEvents
from kefu.sessions.locks import SessionLocks
from kefu.settings import Settings
from kefu.settings.auth_mode import auth_mode
from kefu.shared.client import RedisClient
from kefu.shared.events import RedisSessionEvents
from kefu.shared.keys import RedisKeyStore
from kefu.shared.limits import RedisLimiter
from kefu.shared.locks import RedisSessionLocks
from kefu.shared.sessions import RedisSessionStore
from kefu.store.base import SessionStore
from kefu.store.sqlite import SqliteSessionStore


@dataclass
class State:
    store: SessionStore
    locks: SessionLocks
    events: SessionEvents
    access: Access | None
    redis: RedisClient | None
    limiter: Limiter

    def report_to(self, observer: Observer) -> None:
        metrics = observer.metrics
        if self.redis is not None:

            def observe(op: str, seconds: float, failed: bool) -> None:
                metrics.redis_call(op, seconds, failed)
                observer.redis_calls.record(op, seconds, failed)

            self.redis.observe = observe
        if isinstance(self.limiter, RedisLimiter):
            self.limiter.on_down = metrics.limits_without_redis.inc

    async def close(self) -> None:
        await self.limiter.close()
        if isinstance(self.events, RedisSessionEvents):
            await self.events.close()
        if self.redis is not None:
            await self.redis.close()


def redis_client(settings: Settings) -> RedisClient | None:
    if settings.redis is None:
        return None
    return RedisClient(
        settings.redis, pool_size=settings.redis_pool, timeout=settings.redis_timeout
    )


def key_store(settings: Settings, redis: RedisClient | None) -> KeyStore:
    return (
        RedisKeyStore(redis) if redis is not None else SqliteKeyStore(settings.data_dir / "keys.db")
    )


def open_state(settings: Settings) -> State:
    redis = redis_client(settings)
    limiter: Limiter
    if redis is None:
        store: SessionStore = SqliteSessionStore(settings.data_dir / "sessions.db")
        locks = SessionLocks(settings.session_wait)
        events = SessionEvents()
        limiter = LocalLimiter()
    else:
        store = RedisSessionStore(redis, settings.session_ttl)
        locks = RedisSessionLocks(settings.session_wait, redis)
        events = RedisSessionEvents(redis)
        limiter = RedisLimiter(
            redis,
            timeout=settings.limits_timeout,
            fail_open=settings.limits_on_redis_down == "open",
        )
    mode = auth_mode(settings)
    access = None
    if mode != "none":
        verifier = None
        if mode == "jwt":
            verifier = JwtVerifier(
                key_file=settings.jwt_key,
                jwks_file=settings.jwt_jwks,
                issuer=settings.jwt_issuer,
                audience=settings.jwt_audience,
                leeway=settings.jwt_leeway,
            )
        authenticator = Authenticator(
            mode,
            key_store(settings, redis),
            rate=Rate.parse(settings.rate_limit),
            max_streams=settings.max_streams,
            verifier=verifier,
            leeway=settings.jwt_leeway,
        )
        access = Access(authenticator, limiter)
    return State(store, locks, events, access, redis, limiter)
