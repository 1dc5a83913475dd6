"""The engines file (``--engines-file``): remote engines and the model groups they serve.

```toml
[[engine]]
url = "http://gpu1:8000/v1"     # required
model = "qwen2.5-1.5b-orders"   # what the engine serves; /v1 clients may ask for it by name
group = "orders"                # the group it serves (default: "default")
api_key = "..."                 # optional
name = "gpu1"                   # optional, for logs and metrics

[group.orders]                  # optional, one table per group
intents = ["order_status"]      # /chat turns of these router intents (default: its name)
parallel = 8                    # its admission's slots (default: --parallel)
```

A group is the engines of one model: each has its own routing, breakers and admission.
The default group (the one named ``default``, else the first engine's) answers every LLM turn
of an intent no group claims, and /v1 requests for no model. Parsed and checked here once,
for the settings (a wrong file stops ``kefu serve`` at start) and for the pool.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kefu.engine.base import DEFAULT_GROUP
from kefu.engine.remote import Upstream

ENGINE_KEYS = frozenset(("url", "model", "api_key", "name", "group"))
GROUP_KEYS = frozenset(("intents", "parallel"))


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    intents: tuple[str, ...]
    parallel: int | None = None  # None: --parallel


@dataclass(frozen=True, slots=True)
class EnginesFile:
    engines: tuple[Upstream, ...]
    groups: dict[str, GroupSpec]  # every group an engine serves, in the order first named


def read_engines_file(path: Path) -> EnginesFile:
    """The file's engines and groups; ValueError says what is wrong with it."""
    try:
        with path.open("rb") as f:
            document = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    tables = document.get("engine")
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"{path} has no [[engine]] tables")
    engines = tuple(_engine(path, table) for table in tables)
    named = document.get("group", {})
    if not isinstance(named, dict):
        raise ValueError(f"{path}: [group.NAME] tables expected")
    served = list(dict.fromkeys(e.group for e in engines))
    unserved = sorted(set(named) - set(served))
    if unserved:
        raise ValueError(f"{path}: no engine serves group(s) {unserved}")
    groups = {name: _group(path, name, named.get(name, {})) for name in served}
    claimed: dict[str, str] = {}
    for spec in groups.values():
        for intent in spec.intents:
            if intent in claimed:
                raise ValueError(
                    f"{path}: intent {intent!r} is claimed by groups {claimed[intent]!r} "
                    f"and {spec.name!r}"
                )
            claimed[intent] = spec.name
    return EnginesFile(engines, groups)


def _engine(path: Path, table: Any) -> Upstream:
    url = table.get("url") if isinstance(table, dict) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"{path}: every [[engine]] needs an http(s) url")
    unknown = set(table) - ENGINE_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown engine keys {sorted(unknown)}")
    for key in ("model", "api_key", "name", "group"):
        if key in table and (not isinstance(table[key], str) or not table[key]):
            raise ValueError(f"{path}: the engine {url}'s {key} must be a non-empty string")
    return Upstream(
        url,
        table.get("model"),
        table.get("api_key"),
        table.get("name", ""),
        group=table.get("group", DEFAULT_GROUP),
    )


def _group(path: Path, name: str, table: Any) -> GroupSpec:
    if not isinstance(table, dict):
        raise ValueError(f"{path}: [group.{name}] must be a table")
    unknown = set(table) - GROUP_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)} in [group.{name}]")
    intents = table.get("intents", [name])
    if not isinstance(intents, list) or not all(isinstance(i, str) and i for i in intents):
        raise ValueError(f"{path}: [group.{name}] intents must be a list of names")
    parallel = table.get("parallel")
    if parallel is not None and (type(parallel) is not int or parallel < 1):
        raise ValueError(f"{path}: [group.{name}] parallel must be a whole number from 1")
    return GroupSpec(name, tuple(intents), parallel)


def default_group(groups: dict[str, GroupSpec]) -> str:
    """The group named ``default``, else the first."""
    return DEFAULT_GROUP if DEFAULT_GROUP in groups else next(iter(groups))
