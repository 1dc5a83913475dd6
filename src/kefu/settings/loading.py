"""Where settings come from: defaults < TOML file < ``KEFU_*`` env < flags."""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_origin

from pydantic import ValidationError

from kefu.settings.model import Settings

ENV_PREFIX = "KEFU_"
# Settings an earlier version had: a config file that still names one is read with a
# warning rather than refused (an unknown name is refused: it is most likely a typo).
REMOVED_SETTINGS = {
    "embed_workers": "the static embedder needs no worker threads",
    "faq_threshold": "one decision from the first message on: --faq-precision",
    "faq_threshold_zh": "one decision from the first message on: --faq-precision",
    "faq_margin": "one decision from the first message on: --faq-precision",
    "second_look_margin": "the second look's leads are evidence for --faq-precision's decision",
    "faq_calibration": "the decision is always fitted to the knowledge base's labels",
    "demo_kb": "--demo/--no-demo; unset, the demo is used while the knowledge base holds no other",
}
log = logging.getLogger("kefu.settings")


class SettingsError(ValueError):
    """Invalid settings; the message is one line naming the setting and the reason."""


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


LIST_SEPARATOR = ","  # between the values of a list setting in its env variable


def is_list_field(name: str) -> bool:
    """A setting that takes several values: a repeatable flag, a separated env variable."""
    return get_origin(Settings.model_fields[name].annotation) is tuple


def load_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge the sources; raise SettingsError with a one-line reason if the result is invalid."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    config_file = config_file or (
        Path(environ[env_name("config")]) if env_name("config") in environ else None
    )
    if config_file is not None:
        values.update(_read_toml(config_file))
    for name in Settings.model_fields:
        if env_name(name) in environ:
            value = environ[env_name(name)]
            values[name] = value.split(LIST_SEPARATOR) if is_list_field(name) else value
    values.update({k: v for k, v in (flags or {}).items() if v is not None})
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc)) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
    values = {key.replace("-", "_"): value for key, value in data.items()}
    for name in REMOVED_SETTINGS.keys() & values.keys():
        del values[name]
        log.warning(
            "config file %s: %r was removed (%s); ignored", path, name, REMOVED_SETTINGS[name]
        )
    return values


def _one_line(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        name = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown setting {name!r}")
        elif not name:
            parts.append(f"invalid settings: {message}")
        else:
            flag = f"--{name.replace('_', '-')} ({env_name(name)})"
            parts.append(f"invalid setting {flag}: {message}")
    return "; ".join(parts)
