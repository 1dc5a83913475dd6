"""Reading an OpenAI-compatible stream's chunks: the text kefu reads, and everything else
passed on as it came (``ChunkFields``: tool calls, logprobs, fields kefu does not know).

Pure, one ``ChunkReader`` per stream. A plain text chunk, what nearly every chunk is, costs
a look at its keys and nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kefu.engine.base import FINISH_REASONS, ChunkFields, FinishReason

# What kefu reads or writes itself; every other field whose value is not null is passed on.
KNOWN_CHUNK = frozenset(("id", "object", "created", "model", "choices", "usage"))
# "message" belongs to a whole reply, not a chunk: one in a chunk is dropped.
KNOWN_CHOICE = frozenset(("index", "delta", "finish_reason", "message"))
KNOWN_DELTA = frozenset(("role", "content"))
NO_FIELDS: dict[str, Any] = {}
LEGACY_CALL = -1  # where ``function_call``'s name is remembered among the tool calls


@dataclass(frozen=True, slots=True)
class ReadChunk:
    text: str
    fields: ChunkFields | None  # None: nothing but text
    finish_reason: FinishReason | None


@dataclass
class ChunkReader:
    """One stream's reader. It remembers each tool call's id, type and name once sent: some
    engines repeat them in every fragment (llama-cpp-python's server does), and clients
    that join a call's fragments, as OpenAI's stream has them, join the repeats too
    (LangChain's streamed tool call came out ``order_statusorder_status...``). A repeat is
    dropped; anything that differs passes."""

    sent_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Chunk-level fields of a chunk that had nothing else (a role chunk's
    # system_fingerprint): they go out with the next delta.
    pending: dict[str, Any] = field(default_factory=dict)

    def read(self, chunk: dict[str, Any]) -> ReadChunk:
        text = ""
        finish: FinishReason | None = None
        delta_fields: dict[str, Any] | None = None
        choice_fields: dict[str, Any] | None = None
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue  # nothing in it can be read
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = NO_FIELDS
            content = delta.get("content")
            if isinstance(content, str):
                text += content
            if reason := choice.get("finish_reason"):
                # Another engine's own reason (llama.cpp's "eos") is a plain stop to clients.
                finish = FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
            delta_fields = _unknown(delta, KNOWN_DELTA, delta_fields)
            choice_fields = _unknown(choice, KNOWN_CHOICE, choice_fields)
        chunk_fields = _unknown(chunk, KNOWN_CHUNK, None)
        if delta_fields is not None:
            if "tool_calls" in delta_fields:
                delta_fields["tool_calls"] = self._without_repeats(delta_fields["tool_calls"])
            if "function_call" in delta_fields:  # the older single call, repeated alike
                call = {"index": LEGACY_CALL, "function": delta_fields["function_call"]}
                delta_fields["function_call"] = self._without_repeats([call])[0]["function"]
        if delta_fields is None and choice_fields is None:
            if chunk_fields is not None:
                self.pending |= chunk_fields
            if not (text and self.pending):
                return ReadChunk(text, None, finish)
        if self.pending:
            chunk_fields = self.pending | (chunk_fields or {})
            self.pending = {}
        fields = ChunkFields(
            delta_fields or NO_FIELDS, choice_fields or NO_FIELDS, chunk_fields or NO_FIELDS
        )
        return ReadChunk(text, fields, finish)

    def _without_repeats(self, calls: Any) -> Any:
        if not isinstance(calls, list):
            return calls
        cleaned = []
        for call in calls:
            index = call.get("index") if isinstance(call, dict) else None
            if not isinstance(index, int):
                cleaned.append(call)
                continue
            sent = self.sent_calls.setdefault(index, {})
            call = dict(call)
            for key in ("id", "type"):
                if key in call and call[key] == sent.get(key):
                    del call[key]
                elif key in call:
                    sent[key] = call[key]
            function = call.get("function")
            if isinstance(function, dict) and "name" in function:
                if function["name"] == sent.get("name"):
                    call["function"] = {k: v for k, v in function.items() if k != "name"}
                else:
                    sent["name"] = function["name"]
            cleaned.append(call)
        return cleaned


def _unknown(
    part: dict[str, Any], known: frozenset[str], found: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``found`` with the fields of ``part`` that are not ``known`` and not null added."""
    for key, value in part.items():
        if value is not None and key not in known:
            if found is None:
                found = {}
            found[key] = value
    return found
