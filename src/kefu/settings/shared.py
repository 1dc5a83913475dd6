"""Settings of Redis, the state replicas share."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from kefu.settings.group import SettingsGroup


class SharedSettings(SettingsGroup):
    """Redis: state shared by replicas."""

    heading: ClassVar[str] = "Redis"

    redis: str | None = Field(
        None,
        description="redis:// or rediss:// URL: sessions, their locks and live events, keys "
        "and limits are shared there by every replica (default: SQLite in --data-dir, "
        "limits in process).",
    )
    redis_pool: int = Field(
        64, ge=1, le=10_000, description="Connections one process keeps to Redis at most."
    )
    redis_timeout: float = Field(
        0.25,
        gt=0,
        description="Seconds a Redis call for sessions, keys and events may take before the "
        "request fails with 503.",
    )
    session_ttl: float = Field(
        604_800.0,
        gt=0,
        description="--redis: seconds a session is kept after its last message (Redis "
        "expires it then).",
    )

    # Long conversations: a rolling summary and facts.
    @field_validator("redis")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("give a redis://, rediss:// or unix:// URL")
        return value
