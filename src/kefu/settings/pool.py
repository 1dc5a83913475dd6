"""Settings of remote engines: the pool, routing, timeouts and circuit breakers."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal, get_args

from pydantic import Field, field_validator

from kefu.engine.engines_file import read_engines_file
from kefu.fastpath.router import Intent
from kefu.settings.group import SettingsGroup


class PoolSettings(SettingsGroup):
    """Remote engines (vLLM, SGLang, llama.cpp's server): the pool, routing and breakers."""

    heading: ClassVar[str] = "remote engines"

    engines_file: Path | None = Field(
        None,
        description="TOML file of remote engines, one [[engine]] table each with url and "
        "optionally model, api_key, name and group (the model group it serves: /chat sends "
        "an LLM turn to the group of its intent, /v1 a request to the group of its model), "
        "and optionally a [group.NAME] table per group with intents and parallel; added to "
        "those --engine names (group default). See docs/ARCHITECTURE.md, Model groups.",
    )
    engine_model: tuple[str, ...] = Field(
        (),
        description="Model name to ask each engine URL for, in the same order (one name: all "
        "of them); default: the first model its /v1/models lists (env: separated by commas).",
    )
    engine_api_key: tuple[str, ...] = Field(
        (),
        description="Bearer key for each engine URL, in the same order (one key: all of them; "
        "env: separated by commas).",
    )
    unknown_model: Literal["default", "reject"] = Field(
        "default",
        description="A /v1 request for a model no group serves (by its engines' model name "
        "or the group's name): 'default' answers it with the default group, as one model "
        "answers every name; 'reject' answers 404 in the OpenAI error envelope.",
    )
    routing: Literal["affinity", "least-load", "round-robin"] = Field(
        "affinity",
        description="How the pool picks an engine: 'affinity' keeps a conversation on one "
        "engine (its KV cache) unless that engine is --imbalance busier than the least "
        "loaded; 'least-load'; 'round-robin'.",
    )
    imbalance: int = Field(
        4,
        ge=0,
        description="Requests (kefu's in flight plus the engine's reported queue) by which "
        "a conversation's engine may exceed the least loaded before --routing affinity "
        "sends the request to the least loaded one.",
    )
    first_token_timeout: float = Field(
        15.0,
        gt=0,
        description="Seconds a remote engine may go without a first token while it sends "
        "no text for any other request either (hung): the request then goes to another "
        "engine and this one counts a failure. An engine busy answering others is waited for.",
    )
    engine_timeout: float = Field(
        300.0,
        gt=0,
        description="Seconds a remote engine may take for a whole reply.",
    )
    engine_connections: int = Field(
        256,
        ge=1,
        description="Connections kefu keeps open to each remote engine at most.",
    )
    breaker_failures: int = Field(
        3,
        ge=1,
        description="Consecutive failures (refused, timed out, broken off, failed health "
        "check) after which a remote engine gets no requests until a health check passes.",
    )
    breaker_cooldown: float = Field(
        5.0,
        gt=0,
        description="Seconds a tripped engine rests before a passing health check lets one "
        "trial request through (half-open); its success closes the breaker.",
    )
    engine_check_interval: float = Field(
        1.0,
        gt=0,
        description="Seconds between health checks and /metrics scrapes of each remote "
        "engine (never on the request path).",
    )

    @field_validator("engines_file")
    @classmethod
    def _engines_file_reads(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        known = get_args(Intent)
        for spec in read_engines_file(value).groups.values():  # its ValueError says what
            unknown = [i for i in spec.intents if i not in known and i != spec.name]
            if unknown:
                raise ValueError(
                    f"{value}: [group.{spec.name}] intents {unknown} are not the router's; "
                    f"it finds {', '.join(known)}"
                )
        return value
