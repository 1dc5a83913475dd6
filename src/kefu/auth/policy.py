"""Which scope each route needs, and the auth modes a server can run in."""

from __future__ import annotations

import ipaddress
from typing import Literal

AuthMode = Literal["none", "keys", "jwt"]

# Readable by anyone: probes, the static pages (the chat page carries its own token;
# the agent console asks its agent for a key with the admin scope) and the API's description.
PUBLIC = {
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/"),
    ("GET", "/dashboard"),
    ("GET", "/agent"),
    ("GET", "/widget.js"),
    ("GET", "/widget/config"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
}
# WeChat's callbacks: signed with the channel's token, which the channel checks.
SIGNED_PREFIX = "/wechat/"
# Requests that cost an answer: the ones the token bucket and the stream cap count.
ANSWERS = {("POST", "/chat"), ("POST", "/v1/chat/completions")}


def required_scope(method: str, path: str) -> str | None:
    """None for a public route; unknown paths need admin (they will 404 for admins)."""
    method = "GET" if method == "HEAD" else method
    if (method, path) in PUBLIC or path.startswith(SIGNED_PREFIX):
        return None
    if path == "/chat" or path.startswith("/sessions/"):
        return "chat"
    if path.startswith("/v1/"):
        return "api"
    if path.startswith("/kb") and method == "GET":
        return "api"
    return "admin"


def counts_as_answer(method: str, path: str) -> bool:
    return (method, path) in ANSWERS


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
