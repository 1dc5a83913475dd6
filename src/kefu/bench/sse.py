"""Server-sent events, and what the events of each API mean. Pure parsing, no I/O.

``SseParser`` turns lines of a ``text/event-stream`` body into events (the WHATWG rules:
``event:`` and ``data:`` fields, ``:`` comments, a blank line ends an event, several data
lines join with newlines). ``ChatStream`` reads kefu's ``/chat`` events, ``OpenAIStream``
the chunks of ``/v1/chat/completions``; both say, per event, which reply text it carried.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SseEvent:
    event: str  # "message" where the stream named none
    data: str


class SseParser:
    """Incremental: feed lines without their line ending; an event comes out at a blank line."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None  # a comment, e.g. a keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None  # id, retry and unknown fields carry nothing measured here


def parse_events(text: str) -> list[SseEvent]:
    """A whole body at once (tests, files); a last event without its blank line is kept."""
    parser = SseParser()
    events = [e for line in text.splitlines() if (e := parser.feed(line)) is not None]
    if (last := parser.feed("")) is not None:
        events.append(last)
    return events


class StreamError(Exception):
    """The stream reported an error, or said something that cannot be read."""


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        raise StreamError(f"malformed event data: {data[:120]!r}") from None


def _object(data: str) -> dict[str, Any]:
    value = _json(data)
    if not isinstance(value, dict):
        raise StreamError(f"expected a JSON object: {data[:120]!r}")
    return value


def error_message(body: Any) -> str:
    """The text of an OpenAI error envelope ``{"error": {...}}``, or of anything else."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        code = error.get("code") or error.get("type")
        message = str(error.get("message", "")).strip()
        return f"{code}: {message}" if code else message or "error"
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return str(body)[:200]


@dataclass
class StreamState:
    """What a stream said besides its text; ``complete`` once its proper end was seen."""

    complete: bool = False
    session_id: str | None = None
    tier: str | None = None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    server_timings: dict[str, float] | None = None
    parts: list[str] = field(default_factory=list)

    def handle(self, event: SseEvent) -> str:
        """The reply text this event carried ('' for none); StreamError for an error."""
        raise NotImplementedError

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self.completion_tokens = _int(usage.get("completion_tokens"))
        self.prompt_tokens = _int(usage.get("prompt_tokens"))
        cached = usage.get("cached_prompt_tokens")
        details = usage.get("prompt_tokens_details")
        if cached is None and isinstance(details, dict):
            cached = details.get("cached_tokens")
        self.cached_prompt_tokens = _int(cached)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ChatStream(StreamState):
    """kefu ``/chat``: ``meta`` {session_id}, ``token`` {text}..., then ``done`` or ``error``."""

    def handle(self, event: SseEvent) -> str:
        """The reply text this event carried ('' for none); StreamError for an error event."""
        if event.event == "token":
            text = _object(event.data).get("text", "")
            text = text if isinstance(text, str) else ""
            self.parts.append(text)
            return text
        if event.event == "meta":
            self.session_id = _object(event.data).get("session_id")
        elif event.event == "done":
            body = _object(event.data)
            self.complete = True
            self.session_id = body.get("session_id", self.session_id)
            tier = body.get("tier")
            self.tier = tier if isinstance(tier, str) else None
            self._usage(body.get("usage"))
            timings = body.get("timings")
            if isinstance(timings, dict):
                self.server_timings = {
                    k: float(v) for k, v in timings.items() if isinstance(v, int | float)
                }
        elif event.event == "error":
            raise StreamError(error_message(_json(event.data)))
        return ""


class OpenAIStream(StreamState):
    """``/v1/chat/completions`` with stream: chunks with choices[].delta.content, a usage
    chunk if asked for, then ``data: [DONE]``; an error as a ``data: {"error": ...}`` chunk.
    A reply is complete at ``[DONE]`` or at a choice's finish_reason."""

    def handle(self, event: SseEvent) -> str:
        if event.data.strip() == "[DONE]":
            self.complete = True
            return ""
        chunk = _object(event.data)
        if "error" in chunk:
            raise StreamError(error_message(chunk))
        text = ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                text += content
            if isinstance(choice, dict) and choice.get("finish_reason"):
                self.complete = True  # servers that omit [DONE] still end a reply this way
        if chunk.get("usage"):
            self._usage(chunk["usage"])
        self.parts.append(text)
        return text
