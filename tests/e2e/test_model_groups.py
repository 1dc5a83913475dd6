"""Model groups with real processes: three llama-cpp-python servers on the bundled model, two
serving "smol-faq" (the faq group) and one "smol-general" (the default group), behind one
``kefu serve --engines-file``. /v1 goes by the model asked for, /chat by the intent kefu's
router found; one faq engine killed, its group fails over to the other, and the default
group sees nothing of it.

kefu answers an order-status question with its order tool, never a model, so the /chat
turns that reach a group by intent are the ones the fast path passes on: a question near
the FAQ (the faq group) and one nothing matched (the default).
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from kefu.api.openai.serving import conversation_key
from kefu.engine.base import ChatMessage
from kefu.engine.routing import rendezvous_score
from tests.e2e.support import KefuServer, chat_stream, running_kefu, wait_for
from tests.e2e.upstreams import llama_cpp_process

pytestmark = pytest.mark.e2e

MAX_TOKENS = 8
NEAR_THE_FAQ = "I received a damaged item, what should I do?"
NOTHING_MATCHED = "what is the weather today"


@dataclass
class Shop:
    front: KefuServer
    faq_1: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    base = tmp_path_factory.mktemp("kefu-groups")
    (base / "front").mkdir()
    with ExitStack() as stack:
        urls, processes = {}, {}
        for name, alias in (
            ("faq-1", "smol-faq"),
            ("faq-2", "smol-faq"),
            ("general", "smol-general"),
        ):
            log = base / f"{name}.log"
            urls[name], processes[name] = stack.enter_context(
                llama_cpp_process(log, "--model_alias", alias)
            )
        engines = base / "engines.toml"
        engines.write_text(
            f'[[engine]]\nurl = "{urls["general"]}"\nmodel = "smol-general"\nname = "general"\n'
            f'[[engine]]\nurl = "{urls["faq-1"]}"\nmodel = "smol-faq"\nname = "faq-1"\n'
            'group = "faq"\n'
            f'[[engine]]\nurl = "{urls["faq-2"]}"\nmodel = "smol-faq"\nname = "faq-2"\n'
            'group = "faq"\n'
            '[group.faq]\nintents = ["faq"]\n',
            encoding="utf-8",
        )  # fmt: skip
        flags = [
            *("--engines-file", str(engines), "--no-answer-cache", "--ttft-slo", "60"),
            # A killed engine refuses at once; nothing here needs a short first-token
            # timeout, and a one-thread engine on a busy 2-core box may read a /chat
            # prompt for seconds.
            *("--first-token-timeout", "30", "--breaker-failures", "3"),
            *("--breaker-cooldown", "1", "--engine-check-interval", "0.5"),
            *("--max-tokens", str(MAX_TOKENS), "--parallel", "8"),
        ]
        front = stack.enter_context(running_kefu(base / "front", *flags))
        yield Shop(front, processes["faq-1"])


def rows(shop: Shop) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in shop.front.ready_state()["engine"]["engines"]}


def question(i: int) -> str:
    return f"Question {i}: do you ship abroad?"


def homed_at(name: str, others: list[str]) -> int:
    """A /v1 question whose conversation's affinity home is ``name``."""
    for i in range(1000):
        key = conversation_key([ChatMessage("user", question(i))])
        if max([name, *others], key=lambda n: rendezvous_score(key, n)) == name:
            return i
    raise AssertionError("no question homed there")


def completion(shop: Shop, model: str, i: int = 0) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": question(i)}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
    }
    response = httpx.post(shop.front.url + "/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def answered_by(shop: Shop, message: str) -> dict[str, Any]:
    with httpx.Client(base_url=shop.front.url, timeout=60) as http:
        done: dict[str, Any] = chat_stream(http, message)[-1].json()
    assert done["tier"] == "llm", done
    routed: dict[str, Any] = done["routed"]
    return routed


def requests_by_engine(shop: Shop) -> dict[str, int]:
    return {name: row["requests"] for name, row in rows(shop).items()}


def test_v1_and_chat_go_to_their_groups(shop: Shop) -> None:
    models = httpx.get(shop.front.url + "/v1/models", timeout=10).json()["data"]
    assert {(m["id"], m["meta"]["group"]) for m in models} == {
        ("smol-general", "default"),
        ("smol-faq", "faq"),
    }
    before = requests_by_engine(shop)
    assert completion(shop, "smol-faq")["model"] == "smol-faq"
    after = requests_by_engine(shop)
    assert after["faq-1"] + after["faq-2"] == before["faq-1"] + before["faq-2"] + 1
    assert after["general"] == before["general"]
    completion(shop, "smol-general")
    assert requests_by_engine(shop)["general"] == before["general"] + 1
    assert answered_by(shop, NEAR_THE_FAQ)["group"] == "faq"
    routed = answered_by(shop, NOTHING_MATCHED)
    assert (routed["group"], routed["engine"]) == ("default", "general")


def test_a_killed_engine_fails_over_inside_its_group_only(shop: Shop) -> None:
    general = rows(shop)["general"]
    failed = rows(shop)["faq-1"]["failures"]
    shop.faq_1.send_signal(signal.SIGKILL)
    shop.faq_1.wait()
    # At once, before a health check sees it: a conversation homed on faq-1 tries it,
    # and faq-2 answers.
    completion(shop, "smol-faq", homed_at("faq-1", ["faq-2"]))
    assert rows(shop)["faq-1"]["failures"] > failed
    for i in range(4):  # new conversations, some homed on faq-1
        routed = answered_by(shop, NEAR_THE_FAQ)
        assert (routed["group"], routed["engine"]) == ("faq", "faq-2")
        completion(shop, "smol-faq", i)
    wait_for(lambda: rows(shop)["faq-1"]["breaker"] == "open", "faq-1's breaker")
    # The default group: untouched, and answering.
    routed = answered_by(shop, NOTHING_MATCHED)
    assert (routed["group"], routed["engine"], routed["attempts"]) == ("default", "general", 1)
    now = rows(shop)["general"]
    assert (now["breaker"], now["failures"], now["healthy"]) == (
        "closed",
        general["failures"],
        True,
    )
    metrics = httpx.get(shop.front.url + "/metrics", timeout=10).text
    assert 'kefu_engine_breaker_state{engine="faq-1",group="faq"} 2.0' in metrics
    assert 'kefu_engine_breaker_state{engine="general",group="default"} 0.0' in metrics
