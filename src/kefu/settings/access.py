"""Settings of who may call: API keys, JWTs and the chat page's token."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from kefu.settings.group import SettingsGroup


class AccessSettings(SettingsGroup):
    """Who may call: API keys, JWTs, the page token."""

    heading: ClassVar[str] = "auth"

    auth: Literal["auto", "none", "keys", "jwt"] = Field(
        "auto",
        description="Who may call: 'none' (anyone; only on a loopback --host unless "
        "--insecure), 'keys' (API keys from `kefu keys create`) or 'jwt' (bearer tokens "
        "signed with --jwt-key or --jwt-jwks). 'auto': 'keys' when --host is not a "
        "loopback address, else 'none'.",
    )
    insecure: bool = Field(
        False,
        description="Allow --auth none on a non-loopback --host (anyone who reaches the port "
        "may use and read every session); logged as a warning at start.",
    )
    jwt_key: Path | None = Field(
        None,
        description="--auth jwt: file with the HS256 secret or the PEM public key "
        "(RS256/ES256) tokens are verified with.",
    )
    jwt_jwks: Path | None = Field(
        None,
        description="--auth jwt: JWKS file (JSON) whose keys, chosen by the token's 'kid', "
        "verify tokens (instead of --jwt-key).",
    )
    jwt_issuer: str | None = Field(
        None, description="--auth jwt: the 'iss' every token must carry (unchecked when unset)."
    )
    jwt_audience: str | None = Field(
        None, description="--auth jwt: the 'aud' every token must name (unchecked when unset)."
    )
    jwt_leeway: float = Field(
        30.0, ge=0, le=600, description="Seconds of clock skew allowed on 'exp' and 'nbf'."
    )
