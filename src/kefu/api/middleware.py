"""Every HTTP request gets an id and a Timeline the moment it arrives, and is reported once done.

Raw ASGI, not BaseHTTPMiddleware, so streamed responses pass through untouched
and "sent" is stamped when the last byte is handed to the server.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kefu.observe.timeline import Timeline

# A caller's own id is kept only when it is safe to echo and to log.
_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

Report = Callable[[Scope, str, int, Timeline], None]


class ObserveRequests:
    def __init__(self, app: ASGIApp, report: Report) -> None:
        self.app = app
        self.report = report

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        timeline = Timeline()
        request_id = _incoming_id(scope) or uuid.uuid4().hex[:16]
        state = scope.setdefault("state", {})
        state["timeline"] = timeline
        state["request_id"] = request_id
        status = 500  # what the client gets if the app fails before it starts a response

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
                message = {**message, "headers": headers}
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                timeline.mark("sent")

        try:
            await self.app(scope, receive, observed_send)
        except Exception:
            # A bug, not a KefuError: no handler inside this middleware saw it.
            if timeline.outcome.error is None:
                timeline.outcome.error = "internal_error"
            raise
        finally:
            if "sent" not in timeline.marks:
                timeline.mark("ended")  # the client left or the app failed mid-response
            self.report(scope, request_id, status, timeline)


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            candidate = value.decode("latin-1")
            return candidate if _SAFE_ID.fullmatch(candidate) else None
    return None
