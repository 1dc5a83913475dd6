"""Auth and limits at the door: before the body is read and before the session lock.

Raw ASGI, inside ObserveRequests (so refusals are timed and counted too). A
refusal is answered here, in the OpenAI error envelope with WWW-Authenticate (401,
403) or Retry-After and X-RateLimit-* (429); an admitted answer carries the
X-RateLimit-* headers too. The caller's credential never reaches a log or a reply.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kefu.api.errors import describe
from kefu.auth.policy import counts_as_answer, required_scope
from kefu.auth.principal import Principal
from kefu.errors import Forbidden, KefuError, RateLimited, Unauthenticated
from kefu.observe.metrics import Metrics
from kefu.observe.timeline import Timeline
from kefu.service.access import Admitted
from kefu.service.runtime import Runtime


class Guard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime: Runtime | None = (
            getattr(scope["app"].state, "runtime", None) if scope["type"] == "http" else None
        )
        access = runtime.access if runtime is not None else None
        needed = required_scope(scope["method"], scope["path"]) if access is not None else None
        if runtime is None or access is None or needed is None:
            await self.app(scope, receive, send)
            return
        timeline: Timeline = scope["state"]["timeline"]
        answer = counts_as_answer(scope["method"], scope["path"])
        try:
            admitted = await access.admit(_credential(scope), needed, answer, timeline)
        except KefuError as exc:
            timeline.outcome.error = exc.code
            _count(runtime.observer.metrics, exc)
            await _refuse(exc, send)
            return
        scope["state"]["principal"] = admitted.principal
        try:
            await self.app(scope, receive, _with_limit_headers(send, admitted) if answer else send)
        finally:
            await access.done(admitted)


def owner_of(request: Request) -> str | None:
    """Whose sessions this request may see: None without auth or with the admin scope."""
    principal: Principal | None = getattr(request.state, "principal", None)
    return principal.owner if principal is not None else None


def _count(metrics: Metrics, exc: KefuError) -> None:
    if isinstance(exc, Unauthenticated):
        metrics.auth_failures.labels(exc.reason).inc()
    elif isinstance(exc, Forbidden):
        metrics.auth_failures.labels("scope").inc()
    elif isinstance(exc, RateLimited):
        metrics.limit_rejections.labels(exc.refusal).inc()


def _credential(scope: Scope) -> str | None:
    name: bytes
    value: bytes
    for name, value in scope["headers"]:
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            if kind.lower() == "bearer" and token.strip():
                return token.strip()
        elif name == b"x-api-key":
            return value.decode("latin-1").strip()
    # EventSource cannot send headers: the chat page's live stream passes its token here.
    if scope["method"] == "GET" and scope["path"].endswith("/events"):
        tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("access_token")
        if tokens:
            return str(tokens[0])
    return None


async def _refuse(exc: KefuError, send: Send) -> None:
    status, body, headers = describe(exc)
    payload = json.dumps(body).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *((k.encode(), v.encode()) for k, v in headers.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": payload})


def _with_limit_headers(send: Send, admitted: Admitted) -> Send:
    decision = admitted.decision
    if not decision.limit:
        return send
    extra = [
        (b"x-ratelimit-limit", str(decision.limit).encode()),
        (b"x-ratelimit-remaining", str(decision.remaining).encode()),
        (b"x-ratelimit-reset", str(max(0, round(decision.reset))).encode()),
    ]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending
