"""docs/configuration.md, written from the settings groups themselves: every flag, its
env variable, its default and its help, so the reference cannot drift from the code
(``scripts/settings-doc`` writes it; a test compares)."""

from __future__ import annotations

from pydantic.fields import FieldInfo

from kefu.settings.loading import LIST_SEPARATOR, env_name
from kefu.settings.model import GROUPS

HEADER = """# Configuration

Every setting of `kefu serve`, group by group, as `kefu serve --help` shows them. A
value comes from (lowest first) its default, the TOML file of `--config`
(`KEFU_CONFIG`; keys named like the flags), the `KEFU_…` environment variable, and the
flag. A list setting is given by repeating its flag, or in its env variable separated by
commas.

```toml
# kefu.toml
port = 8080
parallel = 4
persona = "@persona.txt"
history-turns = 5
```

This page is written by `scripts/settings-doc` from `src/kefu/settings/`; edit the
settings' descriptions there, not here.
"""


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def is_switch(field: FieldInfo) -> bool:
    """A setting given as ``--name``/``--no-name``; ``bool | None`` leaves it to kefu when
    neither is given ("auto")."""
    return field.annotation in (bool, bool | None)


def default_text(field: FieldInfo) -> str:
    """A field's default as a person would type it."""
    value = field.get_default(call_default_factory=True)
    if value is None and is_switch(field):
        return "auto"
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return LIST_SEPARATOR.join(str(item) for item in value)
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(name: str, field: FieldInfo) -> str:
    shown = f"`{flag(name)}`"
    if is_switch(field):
        shown += f" / `--no-{name.replace('_', '-')}`"
    default = f"`{_cell(default_text(field))}`"
    return f"| {shown} | `{env_name(name)}` | {default} | {_cell(field.description or '')} |"


def markdown() -> str:
    parts = [HEADER]
    for group in GROUPS:
        parts.append(f"## {group.heading[0].upper()}{group.heading[1:]}\n")
        if group.__doc__:
            parts.append(" ".join(group.__doc__.split()) + "\n")
        parts.append("| flag | env | default | what it does |\n|---|---|---|---|")
        parts.extend(_row(name, field) for name, field in group.model_fields.items())
        parts.append("")
    return "\n".join(parts)
