"""Model groups: the engines file's groups, the group a /v1 model name or a /chat turn's
intent goes to, and each group's own admission."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kefu.engine.base import ChatMessage, Finished, GenerationRequest
from kefu.engine.engines_file import GroupSpec, default_group, read_engines_file
from kefu.engine.fake import FakeEngine
from kefu.engine.groups import EngineGroups
from kefu.errors import NotFound
from kefu.fastpath.router import Candidate, Routing
from kefu.limits.admission import Admission
from kefu.service.groups import Groups, turn_intent
from kefu.settings import Settings
from tests.http.scripted_upstream import ScriptedUpstream


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "engines.toml"
    path.write_text(text, encoding="utf-8")
    return path


TWO_GROUPS = """
[[engine]]
url = "http://a:8000/v1"
model = "big"

[[engine]]
url = "http://b:8000/v1"
model = "small-orders"
group = "orders"

[[engine]]
url = "http://c:8000/v1"
group = "orders"

[group.orders]
intents = ["order_status", "handoff"]
parallel = 3
"""


def test_the_file_names_engines_and_their_groups(tmp_path: Path) -> None:
    found = read_engines_file(write(tmp_path, TWO_GROUPS))
    assert [(e.url, e.group) for e in found.engines] == [
        ("http://a:8000/v1", "default"),
        ("http://b:8000/v1", "orders"),
        ("http://c:8000/v1", "orders"),
    ]
    assert found.groups == {
        "default": GroupSpec("default", ("default",)),
        "orders": GroupSpec("orders", ("order_status", "handoff"), 3),
    }
    assert default_group(found.groups) == "default"


def test_without_a_default_group_the_first_is_default(tmp_path: Path) -> None:
    two = '[[engine]]\nurl = "http://a/v1"\ngroup = "faq"\n'
    two += '[[engine]]\nurl = "http://b/v1"\ngroup = "orders"\n'
    found = read_engines_file(write(tmp_path, two))
    assert default_group(found.groups) == "faq"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[[engine]]\nurl = "http://a/v1"\ncolour = "red"\n', "unknown engine keys ['colour']"),
        ('[[engine]]\nurl = "http://a/v1"\ngroup = ""\n', "group must be a non-empty string"),
        ('[[engine]]\nurl = "http://a/v1"\n[group.faq]\n', "no engine serves group(s) ['faq']"),
        (
            '[[engine]]\nurl = "http://a/v1"\n[group.default]\nparallel = 0\n',
            "parallel must be a whole number",
        ),
        (
            '[[engine]]\nurl = "http://a/v1"\n[group.default]\nspeed = 1\n',
            "unknown keys ['speed'] in [group.default]",
        ),
        (
            '[[engine]]\nurl = "http://a/v1"\n[[engine]]\nurl = "http://b/v1"\ngroup = "x"\n'
            '[group.default]\nintents = ["faq"]\n[group.x]\nintents = ["faq"]\n',
            "intent 'faq' is claimed by groups 'default' and 'x'",
        ),
    ],
)
def test_a_wrong_file_says_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        read_engines_file(write(tmp_path, text))


def test_the_settings_refuse_an_intent_the_router_never_finds(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[[engine]]\nurl = "http://a/v1"\n[group.default]\nintents = ["refunds"]\n'
    )
    with pytest.raises(ValueError, match="intents \\['refunds'\\] are not the router's"):
        Settings.model_validate({"engine": ("llamacpp",), "engines_file": path})


def admission(slots: int = 2) -> Admission:
    return Admission(slots=slots, max_waiting=4, timeout=5.0)


def two_groups(unknown: str = "default") -> Groups:
    pools = {
        "default": ScriptedUpstream().pool(),
        "orders": ScriptedUpstream().pool("orders-1", "small-orders", "orders"),
    }
    specs = {
        "default": GroupSpec("default", ("default",)),
        "orders": GroupSpec("orders", ("order_status",), parallel=7),
    }
    engine = EngineGroups(pools, specs, "default")
    made: list[int | None] = []

    def new_admission(parallel: int | None) -> Admission:
        made.append(parallel)
        return admission(parallel or 2)

    groups = Groups.of(engine, admission(), new_admission, unknown)  # type: ignore[arg-type]
    assert made == [7]
    return groups


def test_a_model_name_finds_its_group() -> None:
    groups = two_groups()
    assert groups.for_model("small-orders").name == "orders"
    assert groups.for_model("orders").name == "orders"  # the group's own name
    assert groups.for_model("").name == "default"
    assert groups.for_model("gpt-4o").name == "default"  # --unknown-model default
    assert groups.get("orders").admission.slots == 7
    assert groups.default.admission is not groups.get("orders").admission


def test_an_unknown_model_is_a_404_when_so_configured() -> None:
    with pytest.raises(NotFound, match="no model 'gpt-4o' here; ask for one of") as raised:
        two_groups("reject").for_model("gpt-4o")
    assert raised.value.param == "model"
    assert "small-orders" in raised.value.message


def test_an_intent_finds_its_group_and_the_rest_the_default() -> None:
    groups = two_groups()
    assert groups.for_intent("order_status").name == "orders"
    assert groups.for_intent("faq").name == "default"
    assert groups.for_intent("general").name == "default"


def test_one_engine_is_one_default_group() -> None:
    engine = FakeEngine()
    groups = Groups.of(engine, admission(), lambda _: admission())
    assert [g.name for g in groups] == ["default"]
    assert groups.for_model("fake-engine").engine is engine
    assert groups.for_intent("order_status").name == "default"


def general(*candidates: tuple[str, float]) -> Routing:
    found = tuple(Candidate(intent, confidence) for intent, confidence in candidates)  # type: ignore[arg-type]
    return Routing("general", found[0].confidence if found else 0.0, 0.01, found)


@pytest.mark.parametrize(
    ("routing", "intent"),
    [
        (Routing("smalltalk", 0.9, 0.2, ()), "smalltalk"),
        # Declined for their margin: the first that reached its threshold.
        (general(("order_status", 0.76), ("faq", 0.75)), "order_status"),
        # An FAQ entry the decision declined, but more likely right than not.
        (general(("faq", 0.5), ("handoff", 0.3)), "faq"),
        # Below every bar: nothing the router found.
        (general(("faq", 0.4), ("handoff", 0.6)), "general"),
        (general(("faq", 0.3)), "general"),
        (general(), "general"),
    ],
)
def test_a_turns_intent_is_what_the_router_found(routing: Routing, intent: str) -> None:
    assert turn_intent(routing) == intent


@pytest.mark.anyio
async def test_a_request_that_names_no_group_goes_to_the_default_one() -> None:
    """A summary's prompt names none; the default group need not be called "default"."""
    faq, orders = ScriptedUpstream(), ScriptedUpstream()
    pools = {"faq": faq.pool(group="faq"), "orders": orders.pool(group="orders")}
    specs = {"faq": GroupSpec("faq", ("faq",)), "orders": GroupSpec("orders", ("orders",))}
    engine = EngineGroups(pools, specs, "faq")
    groups = Groups.of(engine, admission(), lambda _: admission())
    assert groups.get("").name == "faq"
    events = [e async for e in engine.generate(GenerationRequest([ChatMessage("user", "hi")]))]
    assert isinstance(events[-1], Finished)
    assert events[-1].routed is not None
    assert events[-1].routed.group == "faq"
    assert (len(faq.bodies), len(orders.bodies)) == (1, 0)
    await engine.close()
