"""The HTTP side of a bench: the target, a preflight check, and one timed streaming request.

A run's requests go through a few ``httpx.AsyncClient`` (``Clients``), a session always
through the same one. They ignore proxy variables (``trust_env=False``) and follow no
redirects: traffic goes only to the URL given.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx

from kefu.bench.record import RequestRecord
from kefu.bench.sse import (
    ChatStream,
    OpenAIStream,
    SseParser,
    StreamError,
    StreamState,
    error_message,
)
from kefu.bench.workload import Message

Api = Literal["chat", "openai"]
PATHS: dict[Api, str] = {"chat": "/chat", "openai": "/v1/chat/completions"}
Clock = Callable[[], float]


class TargetError(Exception):
    """A URL that cannot be used, or a server that cannot be benched; a one-line reason."""


@dataclass(frozen=True)
class Target:
    """Where requests go and, for --api openai, what the request body holds."""

    base: str  # scheme://host[:port][/prefix], without a trailing slash
    api: Api = "chat"
    model: str | None = None  # openai: the model field; None asks /v1/models
    max_tokens: int = 256  # openai: reply cap (kefu's --max-tokens default)
    temperature: float = 0.3  # openai: sampling (kefu's /chat default)
    system: str | None = None  # openai: system prompt; kefu's /chat adds its persona itself
    history_turns: int = 3  # openai: earlier turns resent (kefu's /chat default)

    @property
    def endpoint(self) -> str:
        return self.base + PATHS[self.api]


def parse_url(url: str) -> str:
    """The base URL of ``http(s)://HOST[:PORT][/PREFIX]``; a trailing ``/chat``,
    ``/v1/chat/completions`` or ``/v1`` (an OpenAI SDK base_url) is dropped."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port_ok = parts.port is None or parts.port > 0
    except ValueError as exc:
        raise TargetError(f"--url {url!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise TargetError(f"--url {url!r}: expected http://HOST[:PORT], e.g. http://127.0.0.1:8000")
    if parts.query or parts.fragment:
        raise TargetError(f"--url {url!r}: give the server's base URL, without ? or #")
    path = parts.path.rstrip("/")
    for suffix in ("/v1/chat/completions", "/chat", "/v1"):
        if path.endswith(suffix):
            path = path.removesuffix(suffix)
            break
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def make_client(
    timeout: float, verify: ssl.SSLContext | None = None, api_key: str | None = None
) -> httpx.AsyncClient:
    # No connection limit: a pool that made requests wait would add client-side queueing
    # to TTFT. Concurrency is bounded by the load generator instead.
    return httpx.AsyncClient(
        headers={"authorization": f"Bearer {api_key}"} if api_key else None,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=1024),
        verify=verify if verify is not None else httpx.create_ssl_context(),
        trust_env=False,
        follow_redirects=False,
    )


# httpcore's pool scans all its connections for each request it places (O(connections x
# requests), encode/httpcore#1035). With one pool for 100 users that scan takes much of a
# run's CPU and times refusals sent within milliseconds at up to seconds: it measures the
# generator, not the server. Spread over 32 pools, 100 users keep ~3 connections each.
CLIENT_SHARDS = 32


class Clients:
    """A run's HTTP clients, ``shards`` of them sharing one TLS context; a session always
    uses the same one, as a customer keeps a connection."""

    def __init__(
        self, timeout: float, shards: int = CLIENT_SHARDS, api_key: str | None = None
    ) -> None:
        verify = httpx.create_ssl_context()
        self._clients = [make_client(timeout, verify, api_key) for _ in range(shards)]

    def for_session(self, index: int) -> httpx.AsyncClient:
        return self._clients[index % len(self._clients)]

    async def __aenter__(self) -> Clients:
        return self

    async def __aexit__(self, *_: object) -> None:
        await asyncio.gather(*(client.aclose() for client in self._clients))


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc).strip()
    if isinstance(exc, httpx.ConnectError):
        return "connection failed (is the server running at that address?)"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return text or type(exc).__name__


async def preflight(client: httpx.AsyncClient, target: Target) -> Target:
    """Check the server answers before any load; for --api openai find the model name."""
    probe = "/ready" if target.api == "chat" else "/v1/models"
    try:
        response = await client.get(target.base + probe, timeout=10.0)
    except httpx.HTTPError as exc:
        raise TargetError(f"cannot reach {target.base}: {_reason(exc)}") from None
    if response.status_code in (401, 403):
        raise TargetError(
            f"GET {target.base}{probe} answered {response.status_code}: the server wants an "
            "API key; give it with --api-key (or KEFU_BENCH_API_KEY)"
        )
    if target.api == "chat":
        if response.status_code == 404:
            raise TargetError(
                f"{target.base} has no /ready: is it kefu? For an OpenAI-compatible server "
                "use --api openai"
            )
        if response.status_code != 200:
            raise TargetError(
                f"{target.base} is not ready: GET /ready answered {response.status_code}"
            )
        return target
    if target.model is not None:
        return target
    try:
        models = response.json()["data"]
        return replace(target, model=str(models[0]["id"]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise TargetError(
            f"GET {target.base}/v1/models answered {response.status_code} without a model "
            "list; name the model with --model"
        ) from None


@dataclass
class Conversation:
    """One customer's side of a session: kefu keeps /chat history by session id; for
    /v1 the client resends the last ``history_turns`` complete turns, as kefu's /chat does."""

    target: Target
    session_id: str | None = None
    history: list[dict[str, str]] = field(default_factory=list)

    def body(self, text: str) -> dict[str, Any]:
        if self.target.api == "chat":
            body: dict[str, Any] = {"message": text}
            if self.session_id is not None:
                body["session_id"] = self.session_id
            return body
        system = [{"role": "system", "content": self.target.system}] if self.target.system else []
        keep = self.history[len(self.history) - 2 * self.target.history_turns :]
        return {
            "model": self.target.model or "default",
            "messages": [*system, *keep, {"role": "user", "content": text}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": self.target.max_tokens,
            "temperature": self.target.temperature,
        }

    def remember(self, text: str, state: StreamState, ok: bool) -> None:
        if state.session_id is not None:
            self.session_id = state.session_id
        reply = "".join(state.parts)
        if ok and reply.strip():
            self.history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": reply},
            ]
            # Older turns are never sent again; don't keep them.
            del self.history[: max(0, len(self.history) - 2 * self.target.history_turns)]


def _http_error(status: int, raw: bytes) -> str:
    # kefu's /chat answers an overflow with a ``busy`` event whose data holds the error.
    if raw.startswith(b"event:"):
        raw = next((line[5:] for line in raw.splitlines() if line.startswith(b"data:")), raw)
    try:
        detail = error_message(json.loads(raw))
    except ValueError:
        detail = raw.decode("utf-8", "replace").strip()[:200]
    return f"HTTP {status}" + (f" {detail}" if detail else "")


async def send(
    client: httpx.AsyncClient,
    conversation: Conversation,
    message: Message,
    record: RequestRecord,
    *,
    clock: Clock,
    limit_s: float,
) -> RequestRecord:
    """Send one message, stream the reply, and fill ``record`` with its timestamps.

    Never raises for the server's or the network's failures: they become ``status``
    "error" or "timeout" with a one-line ``error``.
    """
    target = conversation.target
    state: StreamState = ChatStream() if target.api == "chat" else OpenAIStream()
    parser = SseParser()
    body = conversation.body(message.text)
    record.sent = clock()
    try:
        async with asyncio.timeout(limit_s):
            async with client.stream("POST", target.endpoint, json=body) as response:
                record.first_byte = clock()
                record.http_status = response.status_code
                if response.status_code != 200:
                    raise StreamError(_http_error(response.status_code, await response.aread()))
                async for line in response.aiter_lines():
                    event = parser.feed(line)
                    if event is not None and state.handle(event):
                        now = clock()
                        if record.first_content is None:
                            record.first_content = now
                        record.chunks.append(now)
                if (event := parser.feed("")) is not None:
                    state.handle(event)  # a last event the server did not end with a blank line
                record.end = clock()
        if not state.complete:
            raise StreamError("the stream ended before the reply was complete")
    except TimeoutError:
        record.status, record.error = "timeout", f"no complete reply within {limit_s:g} s"
    except StreamError as exc:
        record.status, record.error = "error", str(exc)
    except httpx.HTTPError as exc:
        record.status, record.error = "error", _reason(exc)
    if record.status != "ok":
        record.end = clock()
    record.tier = state.tier
    record.completion_tokens = state.completion_tokens
    record.prompt_tokens = state.prompt_tokens
    record.cached_prompt_tokens = state.cached_prompt_tokens
    record.server_timings = state.server_timings
    record.reply_chars = sum(len(p) for p in state.parts)
    conversation.remember(message.text, state, record.ok)
    return record
