"""What each route takes and answers, by (method, path), in terms of the wire models.

The document (``document.py``) walks the app's routes and looks each one up here; a
route without an entry shows up as undeclared and fails ``tests/http/test_openapi.py``.
Statuses that follow from the route itself (400/413 for a body, 404 for a path
parameter, 401/403/429 from the auth policy) are added by the document, not listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kefu.api.agent.protocol import (
    AgentReplyIn,
    AgentReplyOut,
    ClaimIn,
    ClaimOut,
    WaitingSessionsOut,
)
from kefu.api.chat.protocol import (
    AgentEvent,
    BusyOut,
    ChatRequest,
    DoneEvent,
    HandoffEvent,
    MetaEvent,
    SessionOut,
    StateEvent,
    TokenEvent,
)
from kefu.api.kb.protocol import ChangeOut, EntriesOut, EntryIn, EntryOut, HitsOut
from kefu.api.openai.protocol import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ModelList,
)
from kefu.api.protocol import DiagnosisOut, ErrorEnvelope, HealthOut, ReadyOut, StatsOut

JsonSchema = dict[str, Any]


@dataclass(frozen=True)
class Param:
    """A query parameter (the routes read these by hand, not through a model)."""

    name: str
    schema: JsonSchema
    description: str
    required: bool = False


@dataclass(frozen=True)
class Stream:
    """A ``text/event-stream`` reply: event name -> the model of its JSON ``data``.

    ``message`` is the name of an event sent without an ``event:`` line (as OpenAI does);
    ``literals`` are data lines that are not JSON (``[DONE]``).
    """

    events: Mapping[str, tuple[type[BaseModel], ...]]
    literals: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reply:
    status: int
    description: str
    model: type[BaseModel] | None = None  # application/json
    media: Mapping[str, JsonSchema] = field(default_factory=dict)  # any other content
    stream: Stream | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # name -> description


@dataclass(frozen=True)
class Operation:
    summary: str
    tag: str
    replies: tuple[Reply, ...]
    body: type[BaseModel] | None = None
    raw_body: Mapping[str, JsonSchema] = field(default_factory=dict)  # media type -> schema
    query: tuple[Param, ...] = ()
    errors: tuple[int, ...] = ()  # beyond those the document derives


HTML = {"text/html": {"type": "string"}}
TEXT = {"type": "string"}
SHOP_NAMES = {
    "type": "object",
    "properties": {"shop": {"type": "object", "additionalProperties": {"type": "string"}}},
    "required": ["shop"],
}
SERVER_TIMING = {"Server-Timing": "The request's stage durations (ms): queue, prefill, …"}
CHAT_EVENTS = Stream(
    {
        "meta": (MetaEvent,),
        "token": (TokenEvent,),
        "handoff": (HandoffEvent,),
        "done": (DoneEvent,),
        "error": (ErrorEnvelope,),
    }
)
BUSY_EVENTS = Stream({"busy": (BusyOut,)})
SESSION_EVENTS = Stream({"agent": (AgentEvent,), "state": (StateEvent,)})
COMPLETION_CHUNKS = Stream({"message": (ChatCompletionChunk, ErrorEnvelope)}, literals=("[DONE]",))
WINDOW = Param(
    "window",
    {"type": "number", "minimum": 1, "maximum": 900, "default": 300},
    "Seconds of recent requests to summarise.",
)
BUCKET = Param(
    "bucket",
    {"type": "number", "minimum": 0.5, "maximum": 900},
    "Seconds per point of the time series (at most the window; default window / 60).",
)
KB_FILE = {"type": "string", "description": "The file's text, UTF-8 (a BOM is fine)."}

WECHAT_QUERY = tuple(
    Param(name, TEXT, description)
    for name, description in (
        ("signature", "SHA-1 of the token, timestamp and nonce (公众号)."),
        ("msg_signature", "SHA-1 over the token, timestamp, nonce and the cipher text."),
        ("timestamp", "When WeChat signed the request (seconds)."),
        ("nonce", "WeChat's random string."),
        ("encrypt_type", "`aes` in 安全模式: the message is in `<Encrypt>`."),
        ("openid", "The sender (公众号; the body says it too)."),
    )
)
ECHOSTR = Param("echostr", TEXT, "The string to echo (微信客服: decrypted).", required=True)
WECHAT_XML = {"text/xml": {"type": "string", "description": "WeChat's XML message."}}
WECHAT_REPLY = Reply(
    200,
    "`success`, or the passive reply as WeChat's XML (encrypted if the request was).",
    media={"text/plain": TEXT, "application/xml": TEXT},
)

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "/health"): Operation(
        "Liveness", "probes", (Reply(200, "The process is up.", HealthOut),)
    ),
    ("GET", "/ready"): Operation(
        "Readiness",
        "probes",
        (
            Reply(200, "Ready: the model is warm, the knowledge base open.", ReadyOut),
            Reply(503, "Loading, or failed to load (see status).", ReadyOut),
        ),
    ),
    ("GET", "/v1/models"): Operation(
        "List models", "openai", (Reply(200, "The model this kefu serves.", ModelList),)
    ),
    ("POST", "/v1/chat/completions"): Operation(
        "Chat completion (OpenAI-compatible)",
        "openai",
        (
            Reply(
                200,
                "The completion; with stream=true, chunks as SSE `data:` frames, an in-band "
                "error frame if the engine fails mid-reply, then `data: [DONE]`.",
                ChatCompletion,
                stream=COMPLETION_CHUNKS,
                headers=SERVER_TIMING,
            ),
        ),
        body=ChatCompletionRequest,
        errors=(429, 500, 503),
    ),
    ("POST", "/chat"): Operation(
        "One customer turn (SSE)",
        "chat",
        (
            Reply(
                200,
                "The turn as server-sent events: `meta`, `token`…, then `done` (or "
                "`handoff` then `done`); an `error` event if it fails after it started.",
                stream=CHAT_EVENTS,
            ),
            Reply(
                503,
                "Not taken: the envelope while loading or without an engine; admission's "
                "refusals (`overloaded`, `queue_full`, `queue_timeout`) as one `busy` event "
                "(the nearest FAQ entries, an offer of a human, when to try again).",
                ErrorEnvelope,
                stream=BUSY_EVENTS,
                headers={"Retry-After": "Seconds to wait before trying again."},
            ),
        ),
        body=ChatRequest,
        errors=(404, 409, 429, 500),
    ),
    ("GET", "/sessions/{session_id}/events"): Operation(
        "The customer's live stream",
        "chat",
        (
            Reply(
                200,
                "A human agent's replies and hand-overs as they happen; comment frames "
                "keep it open.",
                stream=SESSION_EVENTS,
            ),
        ),
        errors=(503,),
    ),
    ("GET", "/sessions/{session_id}"): Operation(
        "Read a session",
        "chat",
        (Reply(200, "The session and its messages.", SessionOut),),
        errors=(503,),
    ),
    ("DELETE", "/sessions/{session_id}"): Operation(
        "Delete a session", "chat", (Reply(204, "Deleted."),), errors=(409, 503)
    ),
    ("GET", "/agent/sessions"): Operation(
        "Sessions waiting for a human",
        "agent",
        (Reply(200, "Oldest first.", WaitingSessionsOut),),
        errors=(503,),
    ),
    ("GET", "/agent/sessions/{session_id}"): Operation(
        "Read a session (agent)",
        "agent",
        (Reply(200, "The session and its messages.", SessionOut),),
        errors=(503,),
    ),
    ("POST", "/agent/sessions/{session_id}/reply"): Operation(
        "Reply as a human agent",
        "agent",
        (Reply(201, "Stored, and pushed to the customer's open streams.", AgentReplyOut),),
        body=AgentReplyIn,
        errors=(409, 503),
    ),
    ("POST", "/agent/sessions/{session_id}/claim"): Operation(
        "Take a session (one agent answers it)",
        "agent",
        (Reply(200, "Claimed; the claim is renewed by each reply.", ClaimOut),),
        body=ClaimIn,
        errors=(409, 503),
    ),
    ("POST", "/agent/sessions/{session_id}/release"): Operation(
        "Hand the session back to the bot",
        "agent",
        (Reply(204, "The bot answers again."),),
        errors=(409, 503),
    ),
    ("GET", "/kb"): Operation(
        "List knowledge-base entries",
        "kb",
        (Reply(200, "Every entry (of the category, if given).", EntriesOut),),
        query=(Param("category", TEXT, "Only entries of this category."),),
        errors=(503,),
    ),
    ("GET", "/kb/search"): Operation(
        "Search the knowledge base",
        "kb",
        (Reply(200, "The best entries, best first, with their scores.", HitsOut),),
        query=(
            Param("q", {"type": "string", "minLength": 1}, "The question.", required=True),
            Param(
                "k",
                {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
                "How many entries.",
            ),
        ),
        errors=(503,),
    ),
    ("POST", "/kb/import"): Operation(
        "Import a knowledge file",
        "kb",
        (Reply(200, "What changed; all or nothing.", ChangeOut),),
        raw_body={
            "text/csv": KB_FILE,
            "text/markdown": KB_FILE,
            "application/json": KB_FILE,
            "application/jsonl": KB_FILE,
        },
        query=(
            Param(
                "filename",
                {"type": "string", "minLength": 1},
                "The file's name; its suffix (.csv .json .jsonl .md) says the format.",
                required=True,
            ),
        ),
        errors=(503,),
    ),
    ("POST", "/kb/entries"): Operation(
        "Add or update an entry",
        "kb",
        (
            Reply(201, "Added.", EntryOut),
            Reply(200, "An entry with the same question was updated.", EntryOut),
        ),
        body=EntryIn,
        errors=(503,),
    ),
    ("GET", "/kb/entries/{entry_id}"): Operation(
        "Read an entry", "kb", (Reply(200, "The entry.", EntryOut),), errors=(503,)
    ),
    ("DELETE", "/kb/entries/{entry_id}"): Operation(
        "Remove an entry", "kb", (Reply(204, "Removed."),), errors=(503,)
    ),
    ("GET", "/metrics"): Operation(
        "Prometheus metrics",
        "observe",
        (Reply(200, "The exposition format.", media={"text/plain": TEXT}),),
    ),
    ("GET", "/stats"): Operation(
        "The recent window summarised",
        "observe",
        (Reply(200, "Percentiles, shares, tier mix, a time series.", StatsOut),),
        query=(WINDOW, BUCKET),
    ),
    ("GET", "/diagnose"): Operation(
        "Where the latency lives",
        "observe",
        (Reply(200, "Findings over the window.", DiagnosisOut),),
        query=(WINDOW, BUCKET),
    ),
    ("GET", "/dashboard"): Operation(
        "The dashboard page", "pages", (Reply(200, "HTML.", media=HTML),)
    ),
    ("GET", "/"): Operation("The chat page", "pages", (Reply(200, "HTML.", media=HTML),)),
    ("GET", "/agent"): Operation("The agent console", "pages", (Reply(200, "HTML.", media=HTML),)),
    ("GET", "/widget.js"): Operation(
        "The embeddable widget's script",
        "pages",
        (Reply(200, "JavaScript.", media={"text/javascript": TEXT}),),
    ),
    ("GET", "/widget/config"): Operation(
        "What the widget's launcher shows",
        "pages",
        (Reply(200, "The shop's name by language.", media={"application/json": SHOP_NAMES}),),
    ),
    ("GET", "/openapi.json"): Operation(
        "This document",
        "pages",
        (Reply(200, "OpenAPI 3.1.", media={"application/json": {"type": "object"}}),),
    ),
    ("GET", "/wechat/mp"): Operation(
        "Official Account: the URL check",
        "wechat",
        (Reply(200, "The echostr, when the signature matches.", media={"text/plain": TEXT}),),
        query=(*WECHAT_QUERY, ECHOSTR),
    ),
    ("POST", "/wechat/mp"): Operation(
        "Official Account: a message or event from WeChat",
        "wechat",
        (WECHAT_REPLY,),
        raw_body=WECHAT_XML,
        query=WECHAT_QUERY,
        errors=(503,),
    ),
    ("GET", "/wechat/kf"): Operation(
        "微信客服: the callback URL check",
        "wechat",
        (Reply(200, "The decrypted echostr.", media={"text/plain": TEXT}),),
        query=(*WECHAT_QUERY, ECHOSTR),
    ),
    ("POST", "/wechat/kf"): Operation(
        "微信客服: messages are waiting (pulled with sync_msg)",
        "wechat",
        (Reply(200, "`success`.", media={"text/plain": TEXT}),),
        raw_body=WECHAT_XML,
        query=WECHAT_QUERY,
        errors=(503,),
    ),
    ("GET", "/docs"): Operation(
        "The API page (renders this document)", "pages", (Reply(200, "HTML.", media=HTML),)
    ),
}
