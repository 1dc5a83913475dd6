"""The ASGI application: routes, error translation, and the lifespan that owns every resource."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.types import Scope

from kefu.api import health, observe, web
from kefu.api.agent import routes as agent
from kefu.api.chat import routes as chat
from kefu.api.errors import http_error_handler, kefu_error_handler, unexpected_error_handler
from kefu.api.kb import routes as kb
from kefu.api.middleware import ObserveRequests
from kefu.api.openai import routes as openai
from kefu.engine.base import ChatMessage, Engine
from kefu.engine.fake import FakeEngine
from kefu.errors import KefuError
from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import HttpOrders, OrderBackend, SqliteOrders
from kefu.knowledge.embedder import StaticEmbedder
from kefu.limits.admission import Admission
from kefu.observe.otel import OtlpExporter
from kefu.service.fast_path import FastPath
from kefu.service.runtime import Runtime
from kefu.service.session_lock import SessionLocks
from kefu.service.timeline import Timeline
from kefu.settings import Settings
from kefu.store.sqlite import SqliteSessionStore

log = logging.getLogger("kefu")

EngineFactory = Callable[[Settings], Engine]


def build_engine(settings: Settings) -> Engine:
    if settings.engine == "fake":
        return FakeEngine(
            context_window=settings.context_size,
            token_delay=settings.fake_token_delay,
            prefill_delay=settings.fake_prefill_delay,
            reply_words=settings.fake_reply_words,
            slots=settings.parallel,
        )
    from kefu.engine.llamacpp.engine import LlamaCppEngine  # loads the llama.cpp library

    return LlamaCppEngine(
        model_path=settings.model,
        slots=settings.parallel,
        context_size=settings.context_size,
        step_tokens=settings.step_tokens,
        threads=settings.threads,
        cache_entries=settings.prefix_cache,
        shared_prefix=[ChatMessage("system", settings.persona)],
        warmup=settings.warmup,
        nice=settings.engine_nice,
    )


def create_app(settings: Settings, engine_factory: EngineFactory = build_engine) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine = engine_factory(settings)
        store = SqliteSessionStore(settings.data_dir / "sessions.db")
        runtime = Runtime(
            settings=settings,
            engine=engine,
            store=store,
            admission=Admission(
                slots=settings.parallel,
                max_waiting=settings.max_queue,
                timeout=settings.queue_timeout,
            ),
            locks=SessionLocks(settings.session_wait),
            hours=ServiceHours.parse(settings.service_hours),
        )
        app.state.runtime = runtime
        exporter = OtlpExporter(settings.otel_endpoint) if settings.otel_endpoint else None
        if exporter is not None:
            runtime.observer.spans = exporter
            await exporter.start()
        await store.open()
        # Load in the background so /health answers and /ready says "loading" meanwhile.
        tasks = [
            asyncio.create_task(runtime.start_engine()),
            asyncio.create_task(_sample_load(runtime)),
        ]
        fast_path = None
        if settings.fast_path:
            fast_path = FastPath(
                settings,
                embedder_factory=StaticEmbedder,
                orders=await _open_orders(settings),
                hours=runtime.hours,
            )
            tasks.append(asyncio.create_task(_run_fast_path(runtime, fast_path)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            runtime.ready = False
            await runtime.drain()
            runtime.fast_path = None
            if fast_path is not None:
                await fast_path.close()
            await engine.close()
            await store.close()
            if exporter is not None:
                await exporter.close()

    return Starlette(
        routes=[
            *health.routes,
            *openai.routes,
            *chat.routes,
            *agent.routes,
            *kb.routes,
            *observe.routes,
            *web.routes,
        ],
        middleware=[Middleware(ObserveRequests, report=_report)],
        exception_handlers={
            KefuError: kefu_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        lifespan=lifespan,
    )


def _report(scope: Scope, request_id: str, status: int, timeline: Timeline) -> None:
    runtime: Runtime | None = getattr(scope["app"].state, "runtime", None)
    if runtime is None:  # a request before the lifespan started
        return
    route = scope.get("route")
    runtime.observer.report(
        request_id=request_id,
        method=scope["method"],
        route=str(getattr(route, "path", scope["path"])),
        status=status,
        timeline=timeline,
    )


async def _open_orders(settings: Settings) -> OrderBackend:
    if settings.order_backend == "http":
        assert settings.order_api_url is not None  # the settings check it
        return HttpOrders(settings.order_api_url)
    orders = SqliteOrders(settings.data_dir / "orders.db")
    await orders.open()
    return orders


async def _run_fast_path(runtime: Runtime, fast_path: FastPath, every: float = 2.0) -> None:
    """Open the fast path, then follow changes the ``kefu kb``/``kefu cache`` commands make:
    a round at once, then every ``every`` seconds (each also reads the next knowledge-base
    texts ahead)."""
    await runtime.start_fast_path(fast_path)
    if runtime.fast_path is None:
        return
    while True:
        try:
            await fast_path.refresh()
        except Exception:
            log.exception("reading knowledge-base or cache changes failed")
        await asyncio.sleep(every)


async def _sample_load(runtime: Runtime, every: float = 1.0) -> None:
    """Queue depth over time for the dashboard: requests only show it once they end."""
    while True:
        runtime.observer.sample_load()
        await asyncio.sleep(every)
