"""A whole reply from its deltas, for a /v1 request that did not ask to stream (kefu always
streams from the engine: that is how it sees the first token, and a hung engine).

The text is joined; what a remote engine's chunks carried besides text (``ChunkFields``) is
merged as OpenAI's own client joins a stream: a delta's fields are increments (strings
joined, lists extended, objects merged; tool calls by their ``index``); a choice's
``logprobs`` are joined the same way and its other fields, like the chunk's, keep the last
value.
"""

from __future__ import annotations

from typing import Any

from kefu.engine.base import ChunkFields


class Assembled:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.delta: dict[str, Any] = {}
        self.calls: dict[Any, Any] = {}  # tool calls by their index, in order of arrival
        self.choice: dict[str, Any] = {}
        self.chunk: dict[str, Any] = {}

    def add(self, text: str, fields: ChunkFields | None) -> None:
        if text:
            self.parts.append(text)
        if fields is None:
            return
        for key, value in fields.delta.items():
            if key == "tool_calls" and isinstance(value, list):
                self._add_calls(value)
            else:
                self.delta[key] = merge(self.delta.get(key), value)
        for key, value in fields.choice.items():
            self.choice[key] = merge(self.choice.get(key), value) if key == "logprobs" else value
        self.chunk.update(fields.chunk)

    def _add_calls(self, fragments: list[Any]) -> None:
        """A fragment joins the call of its ``index`` (its ``arguments`` appended), or
        begins one; the whole message's calls carry no ``index``."""
        for fragment in fragments:
            if not isinstance(fragment, dict):
                self.calls[len(self.calls), "unindexed"] = fragment
                continue
            index = fragment.get("index", len(self.calls))
            rest = {k: v for k, v in fragment.items() if k != "index"}
            self.calls[index] = merge(self.calls.get(index), rest)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def message_fields(self) -> dict[str, Any]:
        """The message's fields besides role and content."""
        if not self.calls:
            return self.delta
        return self.delta | {"tool_calls": list(self.calls.values())}

    @property
    def content(self) -> str | None:
        """The message's content: None for a reply of tool calls alone, as OpenAI's is."""
        text = self.text
        if not text and (self.calls or "function_call" in self.delta):
            return None
        return text


def merge(old: Any, new: Any) -> Any:
    """``new`` added to ``old`` as a stream's increments add up."""
    if old is None:
        return new
    if isinstance(old, str) and isinstance(new, str):
        return old + new
    if isinstance(old, list) and isinstance(new, list):
        return old + new
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = merge(merged.get(key), value)
        return merged
    return new
