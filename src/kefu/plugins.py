"""The parts a package adds to kefu, found through entry points.

A package registers a part under one of the groups below in its ``pyproject.toml``, as
simonw/llm's plugins do, and kefu finds it once the package is installed:

    [project.entry-points."kefu.order_backends"]
    acme = "acme_orders:open_orders"

kefu's own parts register the same way in kefu's ``pyproject.toml``, so a built-in part
and a shop's own are found, named in errors and loaded alike. What each group's object
must be is written beside the group's name.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points

# A function (OrderContext) -> OrderBackend, awaited if it returns an awaitable
# (kefu.fastpath.orders); --order-backend names it.
ORDER_BACKENDS = "kefu.order_backends"
# A directory (a Traversable) holding the language's data files (kefu.text.packs).
LANGUAGES = "kefu.languages"
# A kefu.api.channel.Channel: a messaging platform's routes and running part.
CHANNELS = "kefu.channels"


class UnknownPart(LookupError):
    """No installed package registers a part of that name in the group."""

    def __init__(self, group: str, name: str, known: tuple[str, ...]) -> None:
        super().__init__(
            f"no {group} entry point is named '{name}' (installed: {', '.join(known) or 'none'}); "
            "install the package that provides it"
        )


@cache
def _registered(group: str) -> dict[str, EntryPoint]:
    # Read once per process: the installed packages do not change under a running server.
    return {point.name: point for point in entry_points(group=group)}


def names(group: str) -> tuple[str, ...]:
    """The parts registered in ``group``, sorted."""
    return tuple(sorted(_registered(group)))


def load(group: str, name: str) -> object:
    """The object ``name`` registers in ``group``; ``UnknownPart`` when none does."""
    point = _registered(group).get(name)
    if point is None:
        raise UnknownPart(group, name, names(group))
    return point.load()
