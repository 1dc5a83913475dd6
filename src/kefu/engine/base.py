"""The engine interface: what every engine (embedded, remote, fake) provides.

An engine is a transport in httpx's sense: one async method, ``generate``, that
turns a request into a stream of events. Everything else (admission, sessions,
context) lives above it, so engines stay swappable.

``generate`` yields ``TokenDelta`` events and ends with exactly one ``Finished``.
When the consumer stops iterating (``aclose()``, cancellation, a dropped
client), the engine stops generating for that request and frees its slot.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]
# "tool_calls" and "content_filter" come only from a remote engine, passed on.
FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}
# The group an engine serves when its engines file entry names none, and where LLM turns
# of an intent no group claims go.
DEFAULT_GROUP = "default"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 0.95
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    messages: Sequence[ChatMessage]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    request_id: str = ""
    # What a pool of engines routes on, so a conversation stays where its KV cache is
    # (/chat: the session id; /v1: a digest of the conversation's first messages).
    routing_key: str = ""
    # Request fields kefu does not know, passed on to a remote engine as they came.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The client's messages as they came (/v1 with a remote engine): what the engine is
    # sent, tool calls, tool results and non-text parts included. ``messages`` is their
    # text, which kefu counts and routes on. None: ``messages`` is all there is.
    wire_messages: Sequence[Mapping[str, Any]] | None = None
    # The model group that answers (``engine/groups.py``); "" for the default group.
    group: str = ""
    # Work nobody waits for (a session's summary): the embedded scheduler runs it only
    # in steps with no customer request in the engine; other engines may ignore it.
    background: bool = False
    # False for a prompt nobody sends again (a summary's): the embedded engine frees its KV
    # when it ends instead of keeping it for prefix reuse, where it would push out the
    # conversations' prefixes. Other engines may ignore it.
    keep_prefix: bool = True


@dataclass(frozen=True, slots=True)
class ChunkFields:
    """What a remote engine's chunk carried besides its text, passed on as it came (fields
    whose value is null are left out: they say nothing)."""

    # The choice's delta less role and content: tool_calls, refusal, reasoning_content...
    delta: Mapping[str, Any]
    # The choice less index, delta and finish_reason: logprobs...
    choice: Mapping[str, Any]
    # The chunk less id, object, created, model, choices and usage: system_fingerprint...
    chunk: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TokenDelta:
    """New text for the client; ``text`` is always whole UTF-8 characters. A remote
    engine's delta may carry no text and only ``fields`` (a tool call's fragment)."""

    text: str
    fields: ChunkFields | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    # Prompt tokens whose KV was reused instead of recomputed (prefix cache).
    cached_prompt_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class EngineTimings:
    """``time.perf_counter()`` readings taken by the engine; None where not reached."""

    queued: float
    prefill_started: float | None = None
    first_token: float | None = None
    last_token: float | None = None


@dataclass(frozen=True, slots=True)
class Routed:
    """Which engine of a pool answered, and why the pool chose it."""

    engine: str
    reason: str
    attempts: int = 1
    group: str = DEFAULT_GROUP


@dataclass(frozen=True, slots=True)
class Finished:
    finish_reason: FinishReason
    usage: Usage
    timings: EngineTimings
    routed: Routed | None = None  # set by a pool of remote engines


GenerationEvent = TokenDelta | Finished


@dataclass(frozen=True, slots=True)
class EngineStats:
    """A snapshot of the engine's load, for /ready and metrics."""

    running: int = 0
    waiting: int = 0
    slots: int = 1
    # Of those running, background work (a read ahead, a fold's warm-up) that gives its
    # slot up to a customer: running less this is the customers'.
    background: int = 0
    kv_used_cells: int = 0
    kv_total_cells: int = 0
    # Prefix reuse: KV kept after replies (entries and tokens: host copies), and how much
    # of the prompts it saved; restores: hits whose KV came back from a host copy.
    prefix_cache_entries: int = 0
    prefix_cache_tokens: int = 0
    prefix_lookups: int = 0
    prefix_hits: int = 0
    prefix_restores: int = 0
    prefix_reused_tokens: int = 0
    prompt_tokens: int = 0
    # A pool of remote engines: one row each, and how prompt tokens are counted.
    engines: tuple[UpstreamStats, ...] = ()
    token_counting: str = "exact"


@dataclass(frozen=True, slots=True)
class UpstreamStats:
    """One remote engine of a pool, as /ready, /metrics and /stats show it."""

    name: str
    url: str
    model: str
    breaker: str  # closed, open or half-open
    in_flight: int
    # What the engine's own /metrics report (None when it exposes none).
    queue: float | None
    kv_usage: float | None
    requests: int
    failures: int
    timeouts: int
    ttft_p50_ms: float | None
    healthy: bool
    group: str = DEFAULT_GROUP


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens the way the engine will, so context budgets are exact."""

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the prompt the engine would build for these messages."""
        ...


@runtime_checkable
class PrefixReuse(Protocol):
    """An engine that keeps prompts' KV (the embedded one's prefix cache) and can say how
    much of a new prompt it would not read again: admission judges a prompt by the
    tokens left to read, and a conversation's next turn may have most of its prompt kept."""

    def reusable_prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of this prompt whose KV the engine holds now (a guess: it may change
        before the prompt is read)."""
        ...


def unread_tokens(engine: Tokenizer, messages: Sequence[ChatMessage], prompt_tokens: int) -> int:
    """Tokens of a prompt the engine will have to read: all of them, unless it says what
    it keeps (``PrefixReuse``). A remote engine's own cache is unknown here; the rate
    admission measures for it absorbs what that cache saves."""
    if isinstance(engine, PrefixReuse):
        return max(prompt_tokens - engine.reusable_prompt_tokens(messages), 1)
    return prompt_tokens


def passes_fields(engine: object) -> bool:
    """Whether the engine sends the chat API's fields kefu does not read (tools,
    response_format, logprobs...) to a model that reads them, and returns what that model
    says of them: remote engines do (``passes_fields = True``); the embedded and the fake
    engine do not."""
    return getattr(engine, "passes_fields", False) is True


def system_between_turns(engine: object) -> bool:
    """Whether the engine's chat template takes a system message between turns: /chat then
    sends a message's knowledge-base passages as one, just before it, which the bundled
    model reads better than passages inside the message (asked the capital of Japan with
    them inside, it ran to a 32-token cap nine times in ten; as a system message before it,
    it answered in 7 tokens ten times in ten). Only the embedded engine knows its template;
    a remote one's may reject it (Mistral's, Gemma's), so it gets them in the message."""
    return getattr(engine, "system_between_turns", False) is True


def background_in_idle_steps(engine: object) -> bool:
    """Whether the engine runs ``background`` work only in steps with no customer and gives
    its slot up to the next customer (the embedded scheduler): work sent on speculation
    then costs customers nothing. A remote engine would serve it like any request."""
    return getattr(engine, "background_in_idle_steps", False) is True


class Engine(Tokenizer, Protocol):
    """One async method that produces tokens, plus what callers must know to use it."""

    @property
    def model_id(self) -> str: ...

    @property
    def context_window(self) -> int: ...

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        """Stream the reply; see the module docstring for the contract."""
        ...

    async def start(self) -> None:
        """Load and warm up; after this returns, ``generate`` serves at full speed."""
        ...

    async def close(self) -> None: ...

    def stats(self) -> EngineStats: ...
