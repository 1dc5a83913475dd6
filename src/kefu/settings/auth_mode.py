"""Which auth mode the settings give a server, and whether it is safe on their --host.

Here, not in auth/, because the settings check it when they are loaded (a host open to
anyone without auth stops ``kefu serve`` at start); auth/ takes the mode it is given."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kefu.auth.policy import AuthMode, is_loopback

if TYPE_CHECKING:
    from kefu.settings.model import Settings

log = logging.getLogger("kefu.auth")


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
