"""Settings of the HTTP server: where it listens, the bodies it takes, data and traces."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from kefu.settings.group import SettingsGroup


class ServerSettings(SettingsGroup):
    """The HTTP server: where it listens, what bodies it takes, where its data and traces go."""

    heading: ClassVar[str] = "server"

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=0, le=65535, description="Port to listen on (0 picks a free one).")
    data_dir: Path = Field(
        Path("./kefu-data"), description="Folder for the session database and other state."
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Largest request body accepted (413 beyond)."
    )
    max_message_chars: int = Field(
        8000,
        ge=1,
        description="Longest /chat message accepted, in characters (400 beyond): a customer's "
        "message, not a document. The fast path reads every character before the first token: "
        "a million-character message had not been answered after 5 minutes (fake engine).",
    )
    body_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a client may take to send its request body (408 beyond, and the "
        "connection is closed): a client that trickles a body cannot hold a request open.",
    )
    otel_endpoint: str | None = Field(
        None,
        description="OpenTelemetry collector base URL (OTLP/HTTP JSON, e.g. "
        "http://127.0.0.1:4318): one span per request and per stage. Off when unset.",
    )
    allowed_origins: tuple[str, ...] = Field(
        (),
        description="Web origins of the shop's own sites that may embed the chat widget "
        "(the page at / in an iframe) and call the chat API from the browser (CORS), e.g. "
        "https://shop.example; '*' allows any; repeat the flag for several (env: separated "
        "by commas). None: the page is same-origin only.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level."
    )

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _origins_listed(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("allowed_origins")
    @classmethod
    def _origins_are_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        origins = tuple(v.strip().rstrip("/") for v in value if v.strip())
        for origin in origins:
            if origin != "*" and not re.fullmatch(r"https?://[^/?#\s]+", origin):
                raise ValueError(
                    f"{origin!r} is not an origin: give scheme://host[:port], e.g. "
                    "https://shop.example, or '*'"
                )
        return origins
