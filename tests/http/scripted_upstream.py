"""A scripted OpenAI-compatible upstream behind httpx's MockTransport: a fake, for the HTTP
layer's fast tests of what kefu passes through (the end-to-end tests run real servers).

It records every chat request's body and answers with the chunks it was given, streamed
one by one; ``gate`` (when set) holds the stream after ``hold_after`` chunks until set.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from kefu.engine.base import DEFAULT_GROUP
from kefu.engine.pool import EnginePool
from kefu.engine.remote import RemoteEngine, Upstream
from kefu.engine.token_count import EstimatedCount

MODEL = "scripted-model"


def chunk(delta: dict[str, Any] | None = None, finish: Any = None, **extra: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    choice |= extra.pop("choice", {})
    return {"id": "up-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
            "choices": [choice], **extra}  # fmt: skip


def text_chunks(*words: str) -> list[dict[str, Any]]:
    return [chunk({"role": "assistant", "content": ""})] + [chunk({"content": w}) for w in words]


USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


class ScriptedUpstream:
    def __init__(self, chunks: Sequence[dict[str, Any]] = ()) -> None:
        self.chunks = list(chunks) or [*text_chunks("hi"), chunk(finish="stop")]
        # Set to [] for a stream that ends at once, empty.
        self.bodies: list[dict[str, Any]] = []
        self.gate: asyncio.Event | None = None
        self.hold_after = 1
        self.sent = 0  # chunks streamed so far

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": MODEL}]})
        if path == "/health":
            return httpx.Response(200, json={"status": "ok"})
        if path.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=self._stream()
            )
        return httpx.Response(404, json={"error": {"message": "no such path"}})

    async def _stream(self) -> AsyncIterator[bytes]:
        if not self.chunks:  # a 200 with nothing in it (how some engines decline)
            return
        for i, data in enumerate([*self.chunks, {**chunk(), "choices": [], "usage": USAGE}]):
            if i == self.hold_after and self.gate is not None:
                await self.gate.wait()
            self.sent += 1
            yield f"data: {json.dumps(data)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    def engine(
        self, name: str = "scripted", model: str | None = None, group: str = DEFAULT_GROUP
    ) -> RemoteEngine:
        """``model``: the name the engine is configured with (None: asked of it)."""
        return RemoteEngine(
            Upstream(f"http://{name}.test/v1", model, name=name, group=group),
            context_window=4096,
            connections=4,
            first_token_timeout=5.0,
            timeout=30.0,
            transport=httpx.MockTransport(self.handle),
        )

    def pool(
        self, name: str = "scripted", model: str | None = None, group: str = DEFAULT_GROUP
    ) -> EnginePool:
        return EnginePool(
            [self.engine(name, model, group)],
            routing="affinity",
            imbalance=4,
            failures=3,
            cooldown=1,
            check_interval=60,
            counter=EstimatedCount(),
            group=group,
        )
