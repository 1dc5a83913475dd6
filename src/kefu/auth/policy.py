"""Which scope each route needs, and which auth mode a server runs in."""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kefu.settings import Settings

AuthMode = Literal["none", "keys", "jwt"]
log = logging.getLogger("kefu.auth")

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


def auth_mode(settings: Settings) -> AuthMode:
    if settings.auth == "auto":
        return "none" if is_loopback(settings.host) else "keys"
    return settings.auth


def check_auth_settings(settings: Settings) -> None:
    mode = auth_mode(settings)
    if mode == "none" and not is_loopback(settings.host) and not settings.insecure:
        raise ValueError(
            f"auth 'none' on {settings.host} lets anyone who reaches the port use and read "
            "every session: use --auth keys or jwt, or add --insecure to mean it"
        )
    if mode == "jwt" and (settings.jwt_key is None) == (settings.jwt_jwks is None):
        raise ValueError("auth 'jwt' needs exactly one of --jwt-key and --jwt-jwks")
    for path in (settings.jwt_key, settings.jwt_jwks):
        if path is not None and not path.is_file():
            raise ValueError(f"no such file: {path}")


def warn_if_insecure(settings: Settings) -> None:
    if auth_mode(settings) == "none" and not is_loopback(settings.host):
        log.warning(
            "--insecure: no auth on %s; anyone who reaches the port may use and read every session",
            settings.host,
        )
