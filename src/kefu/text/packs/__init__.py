"""Language packs: the words, patterns and place names of a language, as data files.

A pack is a directory of TOML files, one per concern: ``lexicon.toml`` (the entity
guard's words, ``text/lexicon.py``), ``places.toml`` (the gazetteer, ``text/places.py``),
``rules.toml`` (the fast path's detectors, ``fastpath/rules.py``), ``guard.toml``
(the FAQ guard, ``faq/guard.py``) and ``smalltalk.toml`` (smalltalk's phrases and
replies, ``fastpath/smalltalk.py``). A package registers its pack under the entry-point
group ``kefu.languages`` (``kefu.plugins``); kefu's own, ``en`` and ``zh``, are the
directories beside this file and register the same way. Adding a language is
installing a pack: every concern reads every installed pack and joins what they hold,
in the order of the packs' names, and a pack leaves out the files and keys it has
nothing for. What is said in one language, not joined (a reply), is read from that
language's pack alone (``of``).

Two conventions of the files: where a list of words is read, a string is its words
separated by whitespace (long lists stay readable); and a pack's ``[fragments]`` table
names parts of regular expressions that its other strings use as ``{name}``.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

from kefu import plugins

# The entry points' objects (pyproject.toml).
EN = files(__name__) / "en"
ZH = files(__name__) / "zh"

_FRAGMENT = re.compile(r"\{([a-z_]+)\}")  # never a quantifier's {2,}


def read(concern: str) -> tuple[dict[str, Any], ...]:
    """The ``<concern>.toml`` of every installed pack, its fragments filled in, in the
    order of the packs' names; read once per process."""
    return tuple(_by_pack(concern).values())


@cache
def _by_pack(concern: str) -> dict[str, dict[str, Any]]:
    found = {}
    for name in _holding(concern):
        data = tomllib.loads(_file(name, concern).read_text(encoding="utf-8"))
        found[name] = _filled(data, data.pop("fragments", {}), f"{name}/{concern}.toml")
    return found


def of(concern: str, language: str) -> dict[str, Any]:
    """The ``<concern>.toml`` of the one pack named ``language``, as ``read`` gives it;
    empty when no installed pack has that name or that file."""
    return _by_pack(concern).get(language, {})


def _holding(concern: str) -> tuple[str, ...]:
    """The names of the installed packs that have a ``<concern>.toml``, in order."""
    return tuple(n for n in plugins.names(plugins.LANGUAGES) if _file(n, concern).is_file())


def _file(name: str, concern: str) -> Traversable:
    pack = plugins.load(plugins.LANGUAGES, name)
    if not isinstance(pack, Traversable):
        raise TypeError(f"the {plugins.LANGUAGES} entry point '{name}' is not a directory")
    return pack / f"{concern}.toml"


def joined(concern: str, *keys: str) -> tuple[Any, ...]:
    """The lists under ``keys`` (a key per table level) of every pack, one after another;
    a string stands for its words."""
    items: list[Any] = []
    for data in read(concern):
        value = _under(data, keys, [])
        items.extend(value.split() if isinstance(value, str) else value)
    return tuple(items)


def merged(concern: str, *keys: str) -> dict[str, Any]:
    """The tables under ``keys`` of every pack, merged: the lists of a key one after
    another (a place's names in each pack), any other value the last pack's."""
    table: dict[str, Any] = {}
    for data in read(concern):
        for key, value in _under(data, keys, {}).items():
            both = isinstance(value, list) and isinstance(table.get(key), list)
            table[key] = [*table[key], *value] if both else value
    return table


def any_pattern(concern: str, key: str) -> str:
    """A regular expression that matches where any of the patterns the packs list under
    ``[patterns]`` ``key`` matches; where none lists one, it never matches."""
    return "|".join(f"(?:{p})" for p in joined(concern, "patterns", key)) or "(?!)"


def _under(data: dict[str, Any], keys: tuple[str, ...], missing: object) -> Any:
    for key in keys:
        if key not in data:
            return missing
        data = data[key]
    return data


def _filled(value: Any, fragments: dict[str, str], source: str) -> Any:
    """``value`` with each ``{name}`` in its strings replaced by the fragment ``name``."""
    if isinstance(value, str) and fragments:
        return _FRAGMENT.sub(lambda match: _fragment(fragments, match[1], source), value)
    if isinstance(value, list):
        return [_filled(item, fragments, source) for item in value]
    if isinstance(value, dict):
        return {key: _filled(item, fragments, source) for key, item in value.items()}
    return value


def _fragment(fragments: dict[str, str], name: str, source: str) -> str:
    if name not in fragments:
        raise ValueError(f"{source}: no fragment is named '{name}'")
    return fragments[name]


def forget() -> None:
    """Read the packs again at the next use (tests that install a pack of their own)."""
    _by_pack.cache_clear()
