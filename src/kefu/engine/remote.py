"""One OpenAI-compatible upstream (vLLM, SGLang, llama-server, LiteLLM, another kefu) as an
Engine transport: ``generate`` posts a streaming chat completion and yields its text as each
chunk arrives (nothing is buffered), then one ``Finished`` with the upstream's usage.

It passes the chat API through: a /v1 request's messages and the fields kefu does not read
(tools, response_format, logprobs...) go to the upstream as they came, and what its chunks
carry besides text (tool-call fragments, logprobs, unknown fields) comes back on the
``TokenDelta`` (``engine/chunks.py``).

Failures are ``UpstreamError``s that say whether text had reached the caller
(``started``): before that, the pool may send the request to another engine. A request the
upstream rejects as malformed (4xx) is the caller's error, not the engine's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import httpx

from kefu.engine.base import (
    DEFAULT_GROUP,
    ChatMessage,
    EngineStats,
    EngineTimings,
    Finished,
    FinishReason,
    GenerationEvent,
    GenerationRequest,
    TokenDelta,
    Usage,
)
from kefu.engine.chunks import ChunkReader
from kefu.engine.token_count import EstimatedCount, TokenCounter
from kefu.engine.upstream_metrics import EngineLoad, parse_load
from kefu.errors import ContextLengthExceeded, FirstTokenTimeout, InvalidRequest, UpstreamError

# Statuses that say the request itself is wrong: another engine would refuse it too.
CALLER_ERRORS = frozenset({400, 404, 413, 422})
CHECK_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where one engine is and how to ask it."""

    url: str  # the OpenAI base URL, e.g. http://gpu1:8000/v1
    model: str | None = None  # None: the first model its /v1/models lists
    api_key: str | None = None
    name: str = ""
    group: str = DEFAULT_GROUP  # the model group it serves (engine/engines_file.py)

    @property
    def root(self) -> str:
        """The server's root, where /health, /metrics and /tokenize live."""
        return self.url.rstrip("/").removesuffix("/v1")

    @property
    def label(self) -> str:
        return self.name or self.url.split("://", 1)[-1].rstrip("/").removesuffix("/v1")

    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass
class _Reply:
    """What the upstream's chunks said besides text."""

    finish_reason: FinishReason | None = None
    usage: dict[str, Any] | None = None
    chunks: int = 0
    data_lines: int = 0  # every data line, empty chunks and [DONE] included
    reader: ChunkReader = field(default_factory=ChunkReader)
    # perf_counter readings of the first and the last text; None before any.
    first_text_at: float | None = None
    last_text_at: float | None = None

    @property
    def started(self) -> bool:
        return self.first_text_at is not None


class RemoteEngine:
    passes_fields = True

    def __init__(
        self,
        upstream: Upstream,
        *,
        context_window: int,
        connections: int,
        first_token_timeout: float,
        timeout: float,
        counter: TokenCounter | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``transport``: httpx's, for tests that script an upstream in process."""
        self.upstream = upstream
        self.name = upstream.label
        self.model_id = upstream.model or "unknown"
        self.model_known = upstream.model is not None
        self.context_window = context_window
        self.first_token_timeout = first_token_timeout
        self.timeout = timeout
        self.counter: TokenCounter = counter or EstimatedCount()
        self.in_flight = 0
        # When text last came from this engine, for any request (perf_counter): an engine
        # that answers others is busy, not hung.
        self.progress_at = 0.0
        # One bounded client for the whole life of the engine: connections are reused, and
        # an engine that stalls cannot take more than ``connections`` sockets.
        self.client = httpx.AsyncClient(
            base_url=upstream.url.rstrip("/"),
            headers=upstream.headers(),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            timeout=httpx.Timeout(timeout, connect=min(first_token_timeout, 5.0)),
            transport=transport,
        )
        # Health checks and scrapes on their own connections: a pool of busy streams must
        # not make a healthy engine look dead.
        self.checks = httpx.AsyncClient(
            base_url=upstream.root,
            headers=upstream.headers(),
            limits=httpx.Limits(max_connections=2),
            timeout=CHECK_TIMEOUT_S,
            transport=transport,
        )
        self.health_path = "/health"
        self.scrape_metrics = True

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.counter.count_chat_tokens(messages)

    async def start(self) -> None:
        await self.discover()

    async def close(self) -> None:
        await self.client.aclose()
        await self.checks.aclose()

    def stats(self) -> EngineStats:
        return EngineStats(running=self.in_flight, token_counting=self.counter.describe)

    async def discover(self) -> bool:
        """Read the model name (unless configured) and context window from /v1/models."""
        try:
            response = await self.checks.get(self.upstream.url.rstrip("/") + "/models")
            response.raise_for_status()
            models = response.json()["data"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return False
        card = next((m for m in models if m.get("id") == self.upstream.model), None)
        card = card or (models[0] if models else {})
        if not self.model_known and card.get("id"):
            self.model_id, self.model_known = str(card["id"]), True
        window = card.get("max_model_len") or (card.get("meta") or {}).get("context_window")
        if isinstance(window, int) and window > 0:
            self.context_window = min(self.context_window, window)
        return True

    async def healthy(self) -> bool:
        """``/health`` (vLLM, SGLang, llama-server, kefu), else ``/v1/models``."""
        try:
            response = await self.checks.get(self.health_path)
            if response.status_code == 404 and self.health_path == "/health":
                self.health_path = self.upstream.url.rstrip("/") + "/models"
                response = await self.checks.get(self.health_path)
        except httpx.HTTPError:
            return False
        if response.is_success and not self.model_known:
            await self.discover()
        return response.is_success

    async def load(self) -> EngineLoad | None:
        """The engine's own queue and KV figures, or None where it exposes no /metrics."""
        if not self.scrape_metrics:
            return None
        try:
            response = await self.checks.get("/metrics")
        except httpx.HTTPError:
            return None
        if response.status_code == 404:
            self.scrape_metrics = False
            return None
        if not response.is_success:
            return None
        return parse_load(response.text.splitlines())

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        sampling = request.sampling
        body: dict[str, Any] = {
            **request.extra,
            "messages": (
                request.wire_messages
                if request.wire_messages is not None
                else [{"role": m.role, "content": m.content} for m in request.messages]
            ),
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        if self.model_known:
            body["model"] = self.model_id
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        return body

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        queued = time.perf_counter()
        deadline = queued + self.timeout
        reply = _Reply()
        self.in_flight += 1
        try:
            async with AsyncExitStack() as stack:
                sent = time.perf_counter()
                lines, delta = await self._first_delta(stack, request, reply, deadline)
                while delta is not None:
                    yield delta
                    if time.perf_counter() > deadline:
                        raise UpstreamError(
                            f"engine {self.name} took longer than {self.timeout:g} s",
                            started=True,
                        )
                    delta = await self._next_delta(lines, reply)
            yield self._finished(request, reply, queued, sent)
        except httpx.HTTPError as exc:
            raise UpstreamError(
                f"engine {self.name} failed: {type(exc).__name__} {exc}".rstrip(),
                started=reply.started,
            ) from None
        finally:
            self.in_flight -= 1

    async def _first_delta(
        self, stack: AsyncExitStack, request: GenerationRequest, reply: _Reply, deadline: float
    ) -> tuple[AsyncIterator[str], TokenDelta | None]:
        """Open the stream and read up to its first delta (text, or a tool call's fragment).
        A silence of --first-token-timeout is a hung engine, unless the engine sent text for
        other requests meanwhile: then it is busy (queueing this one, as a single-slot
        server does), and the wait goes on."""

        async def opening() -> tuple[AsyncIterator[str], TokenDelta | None]:
            response = await stack.enter_async_context(
                self.client.stream("POST", "/chat/completions", json=self.body(request))
            )
            await self._check_status(response)
            lines = response.aiter_lines()
            return lines, await self._next_delta(lines, reply)

        task = asyncio.ensure_future(opening())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.first_token_timeout)
                if done:
                    return task.result()
                now = time.perf_counter()
                if now - self.progress_at > self.first_token_timeout or now > deadline:
                    raise FirstTokenTimeout(
                        f"engine {self.name} sent no token in {self.first_token_timeout:g} s"
                    )
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _check_status(self, response: httpx.Response) -> None:
        if response.status_code == 200:
            return
        await response.aread()
        message = _error_message(response)
        if response.status_code in CALLER_ERRORS:
            if "context" in message.lower() and "length" in message.lower():
                raise ContextLengthExceeded(message, param="messages")
            raise InvalidRequest(f"engine {self.name} refused the request: {message}")
        raise UpstreamError(f"engine {self.name} answered {response.status_code}: {message}")

    async def _next_delta(self, lines: AsyncIterator[str], reply: _Reply) -> TokenDelta | None:
        """The stream's next delta with text or other fields, or None at its end."""
        async for line in lines:
            if not line.startswith("data:"):
                continue  # blank separators, comments (keep-alives), event names
            data = line[5:].strip()
            reply.data_lines += 1
            if data == "[DONE]":
                return None
            try:
                chunk = json.loads(data)
                if not isinstance(chunk, dict):
                    raise ValueError("not an object")
            except ValueError:
                raise UpstreamError(
                    f"engine {self.name} sent a chunk that is not a JSON object: {data[:80]!r}",
                    started=reply.started,
                ) from None
            if "error" in chunk:
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else str(error)
                raise UpstreamError(
                    f"engine {self.name} failed mid-reply: {message}", started=reply.started
                )
            if chunk.get("usage"):
                reply.usage = chunk["usage"]
            read = reply.reader.read(chunk)
            if read.finish_reason is not None:
                reply.finish_reason = read.finish_reason
            if read.text or read.fields is not None:
                now = self.progress_at = time.perf_counter()
                reply.first_text_at = reply.first_text_at or now
                reply.last_text_at = now
                reply.chunks += 1
                return TokenDelta(read.text, read.fields)
        if reply.finish_reason is None and reply.data_lines == 0:
            # A 200 whose stream ended cleanly with nothing in it: the engine declined this
            # request streamed. Another engine of the kind would too, and counting it
            # against the breaker would let one client's requests take the whole pool out.
            raise InvalidRequest(
                f"engine {self.name} answered with an empty stream: it does not take this "
                "request streamed, and kefu always streams from its engines "
                "(llama-cpp-python's server streams a tool call only when the request "
                "names the tool)"
            )
        if reply.finish_reason is None:
            raise UpstreamError(
                f"engine {self.name} closed the stream before the reply ended",
                started=reply.started,
            )
        return None

    def _finished(
        self, request: GenerationRequest, reply: _Reply, queued: float, sent: float
    ) -> Finished:
        now = time.perf_counter()
        usage = reply.usage or {}
        details = usage.get("prompt_tokens_details") or {}
        prompt = usage.get("prompt_tokens")
        return Finished(
            finish_reason=reply.finish_reason or "stop",
            usage=Usage(
                prompt_tokens=int(
                    prompt
                    if prompt is not None
                    else EstimatedCount().count_chat_tokens(request.messages)
                ),
                completion_tokens=int(usage.get("completion_tokens") or reply.chunks),
                cached_prompt_tokens=int(details.get("cached_tokens") or 0),
            ),
            timings=EngineTimings(
                queued=queued,
                prefill_started=sent,
                first_token=reply.first_text_at or now,
                last_token=reply.last_text_at or now,
            ),
        )


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail or body)[:200]
