"""The one exception hierarchy of kefu.

Service and engine code raise these; nothing below the HTTP boundary knows
about status codes. ``kefu.api.errors`` translates each class into an HTTP
status and the OpenAI error envelope, as httpx's ``_exceptions.py`` keeps one
tree that transports raise and clients catch.

    KefuError
    ├── RequestError              the caller sent something we cannot serve (4xx)
    │   ├── InvalidRequest        malformed JSON, wrong types, missing fields
    │   │   └── ContextLengthExceeded   the message does not fit the context budget
    │   ├── PayloadTooLarge       the body is over --max-body-bytes
    │   ├── RequestTimeout        the body did not arrive within --body-timeout (408)
    │   ├── NotFound              an unknown session or route
    │   ├── SessionBusy           another turn holds the session for too long
    │   ├── SessionConflict       the session is not in the state the request needs (409)
    │   ├── Unauthenticated       no key or token, or one that is not valid (401)
    │   ├── Forbidden             a valid caller without the scope the route needs (403)
    │   └── RateLimited           the caller's token bucket or stream cap is spent (429)
    ├── Unavailable               retry later; carries ``retry_after`` seconds (503)
    │   ├── EngineNotReady        the model is still loading or warming up
    │   ├── Overloaded            the predicted wait passes --ttft-slo: refused at once
    │   ├── QueueFull             the admission queue is full: fail fast, never queue forever
    │   ├── QueueTimeout          a request waited longer than --queue-timeout
    │   ├── ToolUnavailable       a backend a tool calls (the shop's order API) failed
    │   ├── StateUnavailable      the shared state (Redis) did not answer in time
    │   └── EngineUnavailable     no remote engine can take the request (all down or tripped)
    ├── EngineError               the engine failed this request (500)
    │   └── UpstreamError         a remote engine failed: refused, timed out, broke off
    │       └── FirstTokenTimeout it sent no token within --first-token-timeout
    └── ChannelError              a messaging platform's API (WeChat's) failed a call; never
                                  an HTTP reply: the channel retries or records it
"""

from __future__ import annotations


class KefuError(Exception):
    """Base of every error kefu raises on purpose."""

    code: str = "internal_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class RequestError(KefuError):
    """The request cannot be served as sent; retrying it unchanged will fail again."""

    code = "invalid_request"


class InvalidRequest(RequestError):
    code = "invalid_request"


class ContextLengthExceeded(InvalidRequest):
    code = "context_length_exceeded"


class PayloadTooLarge(RequestError):
    code = "payload_too_large"


class RequestTimeout(RequestError):
    code = "request_timeout"


class NotFound(RequestError):
    code = "not_found"


class SessionBusy(RequestError):
    code = "session_busy"


class SessionConflict(RequestError):
    code = "session_conflict"


# Auth and limits: a 401 or 403 names the reason, never the key or token.
class Unauthenticated(RequestError):
    code = "unauthenticated"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # a metric label: missing, unknown_key, revoked, expired, ...


class Forbidden(RequestError):
    code = "forbidden"


class RateLimited(RequestError):
    code = "rate_limited"

    def __init__(
        self,
        message: str,
        *,
        refusal: str,
        retry_after: float,
        limit: int,
        remaining: int,
        reset: float,
    ) -> None:
        super().__init__(message)
        self.refusal = refusal  # "rate" or "streams"
        self.retry_after = retry_after
        self.limit = limit
        self.remaining = remaining
        self.reset = reset


class Unavailable(KefuError):
    """The server cannot take the request now; the same request may succeed later."""

    code = "unavailable"

    def __init__(self, message: str, *, retry_after: float = 1.0, param: str | None = None) -> None:
        super().__init__(message, param=param)
        self.retry_after = retry_after


class EngineNotReady(Unavailable):
    code = "engine_not_ready"


class Overloaded(Unavailable):
    code = "overloaded"


class QueueFull(Unavailable):
    code = "queue_full"


class QueueTimeout(Unavailable):
    code = "queue_timeout"


class ToolUnavailable(Unavailable):
    code = "tool_unavailable"


class StateUnavailable(Unavailable):
    code = "state_unavailable"


class EngineError(KefuError):
    code = "engine_error"


# Remote engines (engine/remote.py, engine/pool.py).


class EngineUnavailable(Unavailable):
    code = "engine_unavailable"


class UpstreamError(EngineError):
    """A remote engine failed this request; ``started`` says whether it had sent text
    (before that, the pool may try another engine)."""

    code = "upstream_error"

    def __init__(self, message: str, *, started: bool = False) -> None:
        super().__init__(message)
        self.started = started
        self.engine = ""  # the pool names the engine that failed


class FirstTokenTimeout(UpstreamError):
    code = "first_token_timeout"


class ChannelError(KefuError):
    """A messaging platform's API (WeChat's) refused or failed a call."""

    code = "channel_error"

    def __init__(self, message: str, *, errcode: int | None = None, permanent: bool = False):
        super().__init__(message)
        self.errcode = errcode  # the platform's own error code, when it gave one
        self.permanent = permanent  # retrying cannot help (the user left, the window closed)
