"""The HTTP boundary of the error hierarchy: KefuError -> status + OpenAI error envelope.

Every error leaves the server as ``{"error": {"message", "type", "param", "code"}}``,
whether it was raised by kefu, by Starlette (404/405), or was a bug (500, logged,
with no internals in the message). A client that left (ClientGone) gets 499 and no body:
nobody reads it, and it is no server error.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kefu import errors
from kefu.api.disconnect import ClientGone

log = logging.getLogger("kefu.api")

# Most specific first: the first class an error is an instance of decides.
STATUS: list[tuple[type[errors.KefuError], int, str]] = [
    (errors.PayloadTooLarge, 413, "invalid_request_error"),
    (errors.RequestTimeout, 408, "invalid_request_error"),
    (errors.NotFound, 404, "not_found_error"),
    (errors.SessionBusy, 409, "conflict_error"),
    (errors.SessionConflict, 409, "conflict_error"),
    (errors.Unauthenticated, 401, "authentication_error"),
    (errors.Forbidden, 403, "permission_error"),
    (errors.RateLimited, 429, "rate_limit_error"),
    (errors.RequestError, 400, "invalid_request_error"),
    (errors.Unavailable, 503, "service_unavailable_error"),
    (errors.EngineError, 500, "server_error"),
    (errors.KefuError, 500, "server_error"),
]


def error_body(
    message: str, type_: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def describe(exc: errors.KefuError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, envelope and extra headers for a kefu error."""
    status, type_ = next((s, t) for cls, s, t in STATUS if isinstance(exc, cls))
    headers = {}
    if isinstance(exc, errors.Unavailable):
        headers["retry-after"] = str(max(1, math.ceil(exc.retry_after)))
    if isinstance(exc, errors.RequestTimeout):
        headers["connection"] = "close"  # the rest of the body may still be on its way
    headers.update(auth_headers(exc))
    return status, error_body(exc.message, type_, exc.code, exc.param), headers


def auth_headers(exc: errors.KefuError) -> dict[str, str]:
    """RFC 6750's WWW-Authenticate on 401/403, and the limit headers on 429."""
    if isinstance(exc, errors.Unauthenticated):
        return {"www-authenticate": 'Bearer realm="kefu", error="invalid_token"'}
    if isinstance(exc, errors.Forbidden):
        return {"www-authenticate": 'Bearer realm="kefu", error="insufficient_scope"'}
    if isinstance(exc, errors.RateLimited):
        return {
            "retry-after": str(max(1, math.ceil(exc.retry_after))),
            "x-ratelimit-limit": str(exc.limit),
            "x-ratelimit-remaining": str(exc.remaining),
            "x-ratelimit-reset": str(max(0, math.ceil(exc.reset))),
        }
    return {}


async def kefu_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.KefuError)
    timeline = getattr(request.state, "timeline", None)
    if timeline is not None:
        timeline.outcome.error = exc.code
    status, body, headers = describe(exc)
    return JSONResponse(body, status_code=status, headers=headers)


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    type_ = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    message = {
        404: f"no route for {request.method} {request.url.path}",
        405: f"method {request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, str(exc.detail))
    return JSONResponse(
        error_body(message, type_, code=str(exc.status_code)),
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def client_gone_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ClientGone)
    return Response(status_code=499)  # nginx's "client closed request"


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    # This handler runs outside ObserveRequests (in ServerErrorMiddleware): add the id here.
    request_id = getattr(request.state, "request_id", None)
    return JSONResponse(
        error_body(
            "internal server error; the server log has the details",
            "server_error",
            code="internal_error",
        ),
        status_code=500,
        headers={"x-request-id": request_id} if request_id else None,
    )
