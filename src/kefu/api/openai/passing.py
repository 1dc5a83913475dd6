"""What of a /v1 request goes to the engine besides the text kefu reads: for a remote engine,
the messages as they came and every field kefu does not read; for the embedded engine,
nothing, so a request that needs more (tools, a response format, logprobs, an image) is
refused with a 400 that names the field, never answered as if it had not asked.
"""

from __future__ import annotations

from typing import Any

from kefu.api.openai.protocol import ChatCompletionRequest, RequestMessage
from kefu.errors import InvalidRequest

# Engines that call tools behind `kefu serve --engine URL`: the refusal names them.
TOOL_ENGINES = (
    "vLLM (--enable-auto-tool-choice), llama.cpp's llama-server (--jinja) or "
    "llama-cpp-python's server (--chat_format chatml-function-calling)"
)
ELSEWHERE = (
    "the embedded engine generates text only; run kefu with --engine URL in front of an "
    "OpenAI-compatible engine that supports it"
)


def refuse_unsupported(request: ChatCompletionRequest) -> None:
    """Raise InvalidRequest for the first field an engine that passes nothing on cannot
    honour; a field that asks for nothing (``tools: []``, ``tool_choice: "none"``,
    ``response_format: {"type": "text"}``, ``logprobs: false``) is no reason."""
    extra = request.model_extra or {}
    if extra.get("tools") or extra.get("functions"):
        field = "tools" if extra.get("tools") else "functions"
        raise InvalidRequest(
            f"'{field}': the embedded engine does not call tools; run kefu with --engine URL "
            f"in front of an engine that does: {TOOL_ENGINES}",
            param=field,
        )
    choice = extra.get("tool_choice")
    if choice is not None and choice != "none":
        raise InvalidRequest(f"'tool_choice' without 'tools': {ELSEWHERE}", param="tool_choice")
    response_format = extra.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise InvalidRequest(
            f"'response_format': {ELSEWHERE} (vLLM, llama-server, llama-cpp-python's server "
            "constrain replies to JSON)",
            param="response_format",
        )
    if extra.get("logprobs") or extra.get("top_logprobs"):
        field = "logprobs" if extra.get("logprobs") else "top_logprobs"
        raise InvalidRequest(f"'{field}': {ELSEWHERE}", param=field)
    for i, message in enumerate(request.messages):
        _refuse_message(i, message)


def _refuse_message(i: int, message: RequestMessage) -> None:
    extra = message.model_extra or {}
    if message.role == "tool" or extra.get("tool_calls") or extra.get("function_call"):
        raise InvalidRequest(
            f"'messages.{i}': a tool call or its result, and the embedded engine does not "
            f"call tools; run kefu with --engine URL in front of an engine that does: "
            f"{TOOL_ENGINES}",
            param=f"messages.{i}",
        )
    if isinstance(message.content, list):
        kind = next((p.type for p in message.content if p.type != "text"), None)
        if kind is None:
            return
        raise InvalidRequest(
            f"'messages.{i}.content': a {kind!r} part, and {ELSEWHERE}",
            param=f"messages.{i}.content",
        )


def wire_message(message: RequestMessage) -> dict[str, Any]:
    """The message as it came, for a remote engine; two changes that every engine reads as
    the same message: ``developer`` is sent as ``system`` (as kefu always has: most
    open-model templates know no developer role), and an assistant's tool calls with
    ``content: null`` get ``""`` (OpenAI treats both alike; llama-cpp-python's server
    answers null with a 500, which would count against its breaker)."""
    wire = message.model_dump(exclude_unset=True)
    if message.role == "developer":
        wire["role"] = "system"
    if message.role == "assistant" and message.content is None and "tool_calls" in wire:
        wire["content"] = ""
    return wire
