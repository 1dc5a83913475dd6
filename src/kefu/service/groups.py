"""Which model group answers: /chat by the intent kefu's router found, /v1 by the model named.

A group is an engine (a pool of remote engines, or the embedded one as the only group) with
its own admission, built the way the one admission always was. The embedded and fake
engines are one group, ``default``; remote engines are as many as the engines file names
(``engine/engines_file.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from kefu.engine.base import DEFAULT_GROUP, Engine
from kefu.engine.groups import EngineGroups
from kefu.errors import NotFound
from kefu.fastpath.router import RULE_THRESHOLD, Routing
from kefu.limits.admission import Admission

# A declined FAQ candidate at least this likely right makes its turn the FAQ group's.
FAQ_INTENT_PROBABILITY = 0.5


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    engine: Engine
    admission: Admission
    intents: tuple[str, ...] = ()

    def model_names(self) -> set[str]:
        """The names a /v1 client may ask for it by: its engines' models and its own."""
        names = {self.name, self.engine.model_id}
        model_ids = getattr(self.engine, "model_ids", None)
        if model_ids is not None:
            names |= model_ids()
        return names


class Groups:
    def __init__(
        self,
        groups: Sequence[Group],
        default: str,
        unknown_model: Literal["default", "reject"] = "default",
    ) -> None:
        self.by_name = {group.name: group for group in groups}
        self.default = self.by_name[default]
        self.unknown_model = unknown_model
        self.by_intent = {intent: group for group in groups for intent in group.intents}

    @classmethod
    def of(
        cls,
        engine: Engine,
        admission: Admission,
        new_admission: Callable[[int | None], Admission],
        unknown_model: Literal["default", "reject"] = "default",
    ) -> Groups:
        """The engine's groups; the default one keeps ``admission`` (the app's own, which
        /ready and the first prompt read), the others get ``new_admission(parallel)``."""
        if not isinstance(engine, EngineGroups):
            return cls([Group(DEFAULT_GROUP, engine, admission)], DEFAULT_GROUP, unknown_model)
        groups = [
            Group(
                name,
                pool,
                admission if name == engine.default else new_admission(engine.specs[name].parallel),
                engine.specs[name].intents,
            )
            for name, pool in engine.pools.items()
        ]
        return cls(groups, engine.default, unknown_model)

    def __iter__(self) -> Iterator[Group]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)

    def get(self, name: str) -> Group:
        """The group of that name; "" is the default group."""
        return self.by_name[name] if name else self.default

    def for_intent(self, intent: str) -> Group:
        return self.by_intent.get(intent, self.default)

    def for_model(self, model: str) -> Group:
        """The group a /v1 request for ``model`` goes to: by a group's name or one of its
        engines' models; an unknown name per --unknown-model (the default group, or 404)."""
        if not model:
            return self.default
        for group in self.by_name.values():
            if model in group.model_names():
                return group
        if self.unknown_model == "default":
            return self.default
        known = sorted({name for g in self.by_name.values() for name in g.model_names()})
        raise NotFound(
            f"no model {model!r} here; ask for one of {', '.join(known)} (GET /v1/models)",
            param="model",
        )


def turn_intent(routing: Routing) -> str:
    """What a turn the LLM answers is about, for its group: the router's intent, or when
    it declined every candidate (general), the most confident one that reached its own
    bar: a rule's threshold, or for an FAQ entry the decision declined, a probability of
    being right of at least FAQ_INTENT_PROBABILITY (about the entry, not sure enough to
    serve it). A message nothing matched well is general, for the default group."""
    if routing.intent != "general":
        return routing.intent
    for candidate in routing.candidates:  # best first
        bar = FAQ_INTENT_PROBABILITY if candidate.intent == "faq" else RULE_THRESHOLD
        if candidate.confidence >= bar:
            return candidate.intent
    return "general"
