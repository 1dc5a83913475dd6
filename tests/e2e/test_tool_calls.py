"""Function calling and the chat API's other fields through kefu, with real processes:
llama-cpp-python's server (``--chat_format chatml-function-calling``, the bundled model)
behind ``kefu serve --engine URL``. The OpenAI SDK and LangChain's
``ChatOpenAI(...).bind_tools(...)`` get the tool call, streamed and not, and the turn with
the tool's result is answered; response_format and logprobs come back as the engine sent
them. Each request is also sent straight to the engine, so the test compares with it.

llama-cpp-python's server streams a tool call only when the request names the tool
(streaming ``tool_choice: "auto"`` is not supported there: it ends the stream empty), so
the requests here name it, as LangChain's ``tool_choice="order_status"`` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai import OpenAI

from tests.e2e.support import KefuServer, running_kefu
from tests.e2e.upstreams import llama_cpp_server

pytestmark = pytest.mark.e2e

QUESTION: list[Any] = [
    {"role": "system", "content": "You are a shop's assistant. Look orders up with the tool."},
    {"role": "user", "content": "Where is my order LH-10023?"},
]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "Look up an order's status by its id.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]
NAMED: Any = {"type": "function", "function": {"name": "order_status"}}
RESULT = "Order LH-10023 shipped on Monday and arrives on Thursday."


@dataclass
class Servers:
    engine: str  # the engine's /v1 URL
    kefu: KefuServer

    def clients(self) -> Iterator[tuple[str, OpenAI]]:
        for name, url in (("direct", self.engine), ("kefu", self.kefu.url + "/v1")):
            with OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120) as client:
                yield name, client


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    base = tmp_path_factory.mktemp("kefu-tools")
    (base / "front").mkdir()
    chat_format = ("--chat_format", "chatml-function-calling")
    with llama_cpp_server(base / "llama-cpp-server.log", *chat_format) as engine:
        flags = ["--engine", engine, "--no-fast-path", "--ttft-slo", "60"]
        with running_kefu(base / "front", *flags) as kefu:
            yield Servers(engine, kefu)


def test_the_openai_sdk_gets_the_tool_call_and_the_result_is_answered(servers: Servers) -> None:
    for name, client in servers.clients():
        reply = client.chat.completions.create(
            model="any", messages=QUESTION, tools=TOOLS, tool_choice=NAMED,
            max_tokens=48, temperature=0,
        )  # fmt: skip
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", name
        assert choice.message.content is None, name
        calls = [c for c in choice.message.tool_calls or () if c.type == "function"]
        assert [call.function.name for call in calls] == ["order_status"], name
        assert "order_id" in json.loads(calls[0].function.arguments), name  # its grammar's
        if name == "direct":
            continue
        # The next turn: the assistant's message as the SDK gives it (content null; the
        # engine itself answers null with a 500, kefu sends "") and the tool's result.
        turn = [
            *QUESTION,
            choice.message.model_dump(),
            {"role": "tool", "tool_call_id": calls[0].id, "content": RESULT},
        ]
        answer = client.chat.completions.create(
            model="any", messages=turn, tools=TOOLS, max_tokens=24, temperature=0
        )
        assert answer.choices[0].finish_reason in ("stop", "length")
        assert answer.choices[0].message.content


def test_the_openai_sdk_streams_the_tool_call(servers: Servers) -> None:
    for name, client in servers.clients():
        stream = client.chat.completions.create(
            model="any", messages=QUESTION, tools=TOOLS, tool_choice=NAMED,
            max_tokens=48, temperature=0, stream=True,
        )  # fmt: skip
        fragments, ids, names, finish = [], set(), [], None
        for chunk in stream:
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for call in choice.delta.tool_calls or ():
                    assert call.index == 0
                    ids.add(call.id)
                    if call.function and call.function.name:
                        names.append(call.function.name)
                    fragments.append(call.function.arguments if call.function else "")
        assert finish == "tool_calls", name
        assert len(fragments) > 3, name  # fragment by fragment, not one piece at the end
        assert "order_id" in json.loads("".join(f or "" for f in fragments)), name
        if name == "kefu":  # named once, as OpenAI streams a call; the engine repeats it
            assert names == ["order_status"]
            assert len(ids - {None}) == 1


@tool
def order_status(order_id: str) -> str:
    """Look up an order's status by its id."""
    return RESULT


def test_langchain_gets_the_tool_call_streamed_and_not(servers: Servers) -> None:
    # LangChain sends max_tokens as max_completion_tokens, which kefu honours (the
    # engine's server ignores it): room for the whole call, about 75 tokens of this model.
    llm = ChatOpenAI(
        base_url=servers.kefu.url + "/v1", api_key="none", model="any",  # type: ignore[arg-type]
        temperature=0, max_tokens=160, max_retries=0, timeout=120,  # type: ignore[call-arg]
    )  # fmt: skip
    bound = llm.bind_tools([order_status], tool_choice="order_status")
    question = HumanMessage("Where is my order LH-10023?")
    called = bound.invoke([question])
    assert [call["name"] for call in called.tool_calls] == ["order_status"]
    assert "order_id" in called.tool_calls[0]["args"]
    streamed: Any = None
    for piece in bound.stream([question]):
        streamed = piece if streamed is None else streamed + piece
    assert [call["name"] for call in streamed.tool_calls] == ["order_status"]
    assert "order_id" in streamed.tool_calls[0]["args"]
    # LangChain sends the call back with content null, and the tool's result.
    result = ToolMessage(RESULT, tool_call_id=called.tool_calls[0]["id"])
    answer = llm.bind_tools([order_status]).invoke([question, called, result])
    assert isinstance(answer.content, str)
    assert answer.content


def test_response_format_and_logprobs_come_back_as_the_engine_sent_them(
    servers: Servers,
) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}},
        "required": ["name"],
        "additionalProperties": False,
    }
    body = {
        "messages": [{"role": "user", "content": "Give me a JSON object with a name."}],
        "max_tokens": 24,
        "temperature": 0,
        "seed": 7,
        "logprobs": True,
        "top_logprobs": 2,
        # llama-cpp-python's own JSON-schema form (it does not take "json_schema").
        "response_format": {"type": "json_object", "schema": schema},
    }
    replies = {}
    for name, url in (("direct", servers.engine), ("kefu", servers.kefu.url + "/v1")):
        for stream in (False, True):
            replies[name, stream] = complete(url, {**body, "stream": stream})
    for (name, stream), (content, tokens) in replies.items():
        assert set(json.loads(content)) == {"name"}, (name, stream, content)
        assert "".join(t["token"] for t in tokens) == content, (name, stream)
        assert all(t["top_logprobs"] for t in tokens), (name, stream)
    assert replies["kefu", False] == replies["direct", False]
    assert replies["kefu", True] == replies["direct", True]


def complete(url: str, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The reply's text and its logprobs' tokens, streamed or not."""
    if not body["stream"]:
        response = httpx.post(url + "/chat/completions", json=body, timeout=120)
        assert response.status_code == 200, response.text
        choice = response.json()["choices"][0]
        return choice["message"]["content"], choice["logprobs"]["content"]
    content, tokens = "", list[dict[str, Any]]()
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:])["choices"]:
                content += choice["delta"].get("content") or ""
                tokens += (choice.get("logprobs") or {}).get("content") or []
    return content, tokens
