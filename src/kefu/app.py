"""The ASGI application: routes, error translation, and the lifespan that owns every resource."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import Scope

from kefu import demo
from kefu.api import health, observe, web
from kefu.api.agent import routes as agent
from kefu.api.channel import Channel, RunningChannel, registered
from kefu.api.chat import routes as chat
from kefu.api.disconnect import ClientGone
from kefu.api.errors import (
    client_gone_handler,
    http_error_handler,
    kefu_error_handler,
    unexpected_error_handler,
)
from kefu.api.guard import Guard
from kefu.api.kb import routes as kb
from kefu.api.middleware import ObserveRequests
from kefu.api.openai import routes as openai
from kefu.api.openapi import routes as openapi
from kefu.engine.base import DEFAULT_GROUP, ChatMessage, Engine
from kefu.engine.engines_file import GroupSpec, default_group, read_engines_file
from kefu.engine.fake import FakeEngine
from kefu.engine.groups import EngineGroups
from kefu.engine.pool import EnginePool
from kefu.engine.remote import RemoteEngine, Upstream
from kefu.engine.token_count import GgufCount
from kefu.errors import KefuError, StateUnavailable
from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.orders import OrderBackend, OrderContext, open_backend
from kefu.heap import trim_every
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.second_look import E5Transformer
from kefu.limits.admission import Admission
from kefu.observe.otel import OtlpExporter
from kefu.observe.timeline import Timeline
from kefu.service.fast_path import FastPath
from kefu.service.judging import Judge
from kefu.service.runtime import Runtime
from kefu.sessions.claims import LocalClaims
from kefu.settings import Settings
from kefu.settings.auth_mode import warn_if_insecure
from kefu.shared.changes import SharedChanges
from kefu.shared.claims import RedisClaims
from kefu.state import State, open_state
from kefu.threads import one_blas_thread

log = logging.getLogger("kefu")

EngineFactory = Callable[[Settings], Engine]


def build_engine(settings: Settings) -> Engine:
    if settings.engine_kind == "remote":
        return _build_remote(settings)
    if settings.engine_kind == "fake":
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


def _build_remote(settings: Settings) -> EngineGroups:
    """The engines of --engine and --engines-file, a pool per group (often one)."""
    engines = _upstreams(settings)
    specs = read_engines_file(settings.engines_file).groups if settings.engines_file else {}
    for upstream in engines:
        specs.setdefault(upstream.group, GroupSpec(upstream.group, (upstream.group,)))
    pools = {
        name: _build_pool(settings, [e for e in engines if e.group == name], name) for name in specs
    }
    return EngineGroups(pools, specs, default_group(specs))


def _upstreams(settings: Settings) -> list[Upstream]:
    """The engines --engine names (with --engine-model and --engine-api-key by position,
    or one value for all; group default), then those of --engines-file."""
    urls = [u for u in settings.engine if u.startswith(("http://", "https://"))]

    def nth(values: tuple[str, ...], i: int) -> str | None:
        if not values:
            return None
        return values[0] if len(values) == 1 else values[i] if i < len(values) else None

    found = [
        Upstream(url, nth(settings.engine_model, i), nth(settings.engine_api_key, i))
        for i, url in enumerate(urls)
    ]
    if settings.engines_file is not None:
        found += read_engines_file(settings.engines_file).engines
    return found


def _build_pool(
    settings: Settings, engines: Sequence[Upstream], group: str = DEFAULT_GROUP
) -> EnginePool:
    return EnginePool(
        [
            RemoteEngine(
                upstream,
                context_window=settings.context_size,
                connections=settings.engine_connections,
                first_token_timeout=settings.first_token_timeout,
                timeout=settings.engine_timeout,
            )
            for upstream in engines
        ],
        routing=settings.routing,
        imbalance=settings.imbalance,
        failures=settings.breaker_failures,
        cooldown=settings.breaker_cooldown,
        check_interval=settings.engine_check_interval,
        counter=GgufCount(settings.tokenizer) if settings.tokenizer else None,
        group=group,
    )


def _judge_engine(settings: Settings, serving: Engine) -> Engine | None:
    """The engine that judges knowledge-base answers in the background: --judge-engine,
    or the serving engine where the operator says it can (--judge-with-engine)."""
    if settings.judge_with_engine:
        return serving
    if settings.judge_engine is None:
        return None
    return RemoteEngine(
        Upstream(settings.judge_engine, settings.judge_model, None, "judge"),
        context_window=settings.context_size,
        connections=2,
        first_token_timeout=settings.first_token_timeout,
        timeout=settings.engine_timeout,
    )


def create_app(settings: Settings, engine_factory: EngineFactory = build_engine) -> Starlette:
    channels = registered()  # WeChat, and any a package registers

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine = engine_factory(settings)
        warn_if_insecure(settings)
        state = open_state(settings)
        exporter = OtlpExporter(settings.otel_endpoint) if settings.otel_endpoint else None
        shared = SharedChanges(state.redis) if state.redis is not None else None
        demo_in_use = demo.in_use(settings)
        runtime = _build_runtime(settings, demo_in_use, engine, state, shared, exporter)
        app.state.runtime = runtime
        if exporter is not None:
            await exporter.start()
        await state.store.open()
        app.state.channels = opened = _open_channels(channels, runtime, state)
        fast_path = await _build_fast_path(runtime, demo_in_use) if settings.fast_path else None
        # Load in the background so /health answers and /ready says "loading" meanwhile.
        starts = [asyncio.create_task(runtime.start_engine())]
        tasks = [asyncio.create_task(_sample_load(runtime)), asyncio.create_task(trim_every())]
        if fast_path is not None:
            starts.append(asyncio.create_task(runtime.start_fast_path(fast_path)))
            follow = _follow_changes(runtime, fast_path, starts[-1], shared)
            tasks.append(asyncio.create_task(follow))
        tasks.append(asyncio.create_task(_freeze_when_started(starts)))
        # Process-wide like the frozen objects, and given back at the end the same way.
        restore_blas = one_blas_thread()
        try:
            yield
        finally:
            for task in starts + tasks:
                task.cancel()
            await asyncio.gather(*starts, *tasks, return_exceptions=True)
            gc.unfreeze()
            restore_blas()
            await _close(runtime, opened, fast_path, state)
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
            *openapi.routes,
            *(route for channel in channels.values() for route in channel.routes(settings)),
        ],
        middleware=[
            *_cors(settings),
            Middleware(ObserveRequests, report=_report),
            Middleware(Guard),
        ],
        exception_handlers={
            KefuError: kefu_error_handler,
            HTTPException: http_error_handler,
            ClientGone: client_gone_handler,
            Exception: unexpected_error_handler,
        },
        lifespan=lifespan,
    )


def _cors(settings: Settings) -> list[Middleware]:
    """--allowed-origins: a shop's own site may call the API from the browser. Outermost,
    so a preflight is answered before auth asks it for a credential it never carries."""
    if not settings.allowed_origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=list(settings.allowed_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["authorization", "content-type", "x-api-key", "x-request-id"],
            # What a page reads to retry politely and to report a request.
            expose_headers=[
                *("retry-after", "x-request-id", "server-timing"),
                *("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"),
            ],
            max_age=600,
        )
    ]


def _build_runtime(
    settings: Settings,
    demo_in_use: bool,
    engine: Engine,
    state: State,
    shared: SharedChanges | None,
    spans: OtlpExporter | None,
) -> Runtime:
    # What the turns read: the demo's shop values where it is in use and left unset.
    shop = demo.applied(settings) if demo_in_use else settings
    if demo_in_use:
        log.info(
            "answering as the demo shop (kefu.demo): import your knowledge base with "
            "`kefu kb import` and restart, or start with --no-demo"
        )
    runtime = Runtime(
        settings=shop,
        engine=engine,
        store=state.store,
        admission=Admission(
            slots=settings.parallel,
            max_waiting=settings.max_queue,
            timeout=settings.queue_timeout,
            ttft_slo=settings.ttft_slo,
            policy=settings.admission,
            shadow=settings.admission_shadow,
            quantile=settings.admission_quantile,
        ),
        locks=state.locks,
        hours=ServiceHours.parse(shop.service_hours),
        events=state.events,
        access=state.access,
        replication=shared,
        claims=RedisClaims(state.redis) if state.redis is not None else LocalClaims(),
        spans=spans,
    )
    state.report_to(runtime.observer)
    return runtime


def _open_channels(
    channels: dict[str, Channel], runtime: Runtime, state: State
) -> dict[str, RunningChannel]:
    """The configured channels, running; an agent's reply reaches their conversations."""
    opened: dict[str, RunningChannel] = {}
    for name, channel in channels.items():
        running = channel.open(runtime, state.redis, state.limiter)
        if running is not None:
            opened[name] = running
            runtime.outbound.append(running)
            running.start()
    return opened


async def _build_fast_path(runtime: Runtime, demo_in_use: bool) -> FastPath:
    """The fast path, its orders open; its knowledge base opens in runtime.start_fast_path."""
    settings = runtime.settings
    fast_path = FastPath(
        settings,
        embedder_factory=StaticEmbedder,
        orders=await _open_orders(settings, demo_in_use),
        hours=runtime.hours,
        transformer_factory=E5Transformer,
        demo_in_use=demo_in_use,
    )
    judge = _judge_engine(settings, runtime.engine)
    if judge is not None:
        start = judge is not runtime.engine
        fast_path.judge = Judge(judge, fast_path.record_verdict, start=start)
    return fast_path


async def _close(
    runtime: Runtime,
    channels: dict[str, RunningChannel],
    fast_path: FastPath | None,
    state: State,
) -> None:
    """Stop taking work, finish the turns in flight (their records are stored), then close
    what they used, users before what they use."""
    runtime.ready = False
    for running in channels.values():
        await running.close()
    await runtime.drain()
    await runtime.close()
    runtime.fast_path = None
    if fast_path is not None:
        await fast_path.close()
        if fast_path.judge is not None and fast_path.judge.engine is not runtime.engine:
            await fast_path.judge.engine.close()
    await runtime.engine.close()
    await state.store.close()
    await state.close()


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


async def _open_orders(settings: Settings, demo_in_use: bool) -> OrderBackend:
    """The backend --order-backend names (kefu's own or a package's), opened."""
    context = OrderContext(
        data_dir=settings.data_dir,
        api_url=settings.order_api_url,
        sample_orders=demo.sample_orders if demo_in_use else None,
    )
    return await open_backend(settings.order_backend, context)


async def _freeze_when_started(starts: list[asyncio.Task[None]]) -> None:
    """Once the model and the knowledge base are loaded, move what loading made (about
    90 000 objects with the demo shop, jieba's 350 000-word dictionary among them) out of the
    garbage collector's sight. A full collection otherwise walks all of it, stopping
    every request for 100-120 ms (one did under benchmarks/fast_path.py); frozen, it
    takes 0.3 ms. What requests make is still collected. The lifespan's end unfreezes."""
    await asyncio.gather(*starts, return_exceptions=True)
    gc.freeze()
    log.debug("%d objects of the loaded state frozen", gc.get_freeze_count())


async def _follow_changes(
    runtime: Runtime,
    fast_path: FastPath,
    started: asyncio.Task[None],
    shared: SharedChanges | None = None,
    every: float = 2.0,
) -> None:
    """Once the fast path is open, follow changes the ``kefu kb``/``kefu cache`` commands
    make, and with --redis the other replicas' knowledge-base changes and cached answers:
    a round at once, then every ``every`` seconds (each also reads the next
    knowledge-base texts ahead)."""
    await started
    if runtime.fast_path is None:
        return
    while True:
        if shared is not None:
            try:
                await shared.follow(fast_path)
            except StateUnavailable:
                pass  # the client logs the outage once; the next round tries again
            except Exception:
                log.exception("applying another replica's knowledge-base change failed")
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
