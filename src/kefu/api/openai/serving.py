"""Logic of /v1/chat/completions and /v1/models: wire models in and out, no web framework."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from kefu.api.openai.assemble import Assembled
from kefu.api.openai.passing import refuse_unsupported, wire_message
from kefu.api.openai.protocol import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    Delta,
    ModelCard,
    ModelList,
    PromptTokensDetails,
    ResponseMessage,
    UsageInfo,
)
from kefu.engine.base import (
    ChatMessage,
    Finished,
    GenerationRequest,
    Role,
    SamplingParams,
    TokenDelta,
    Usage,
    passes_fields,
    unread_tokens,
)
from kefu.errors import ContextLengthExceeded, EngineError
from kefu.observe.timeline import Timeline
from kefu.service.groups import Group
from kefu.service.runtime import Runtime

# The roles kefu counts a message's text as (a tool's result is input the model reads).
ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "user",
}


def list_models(runtime: Runtime) -> ModelList:
    """A card per model group: the model its engines serve (the group's name where another
    group serves the same model), the name a request asks for it by."""
    cards = []
    for group in runtime.groups:
        engine = group.engine
        shared = any(
            other is not group and other.engine.model_id == engine.model_id
            for other in runtime.groups
        )
        meta: dict[str, Any] = {"context_window": engine.context_window, "group": group.name}
        if group.intents:
            meta["intents"] = list(group.intents)
        cards.append(
            ModelCard(
                id=group.name if shared else engine.model_id,
                created=int(runtime.started_at),
                meta=meta,
            )
        )
    return ModelList(data=cards)


async def checked_request(
    runtime: Runtime, request: ChatCompletionRequest, request_id: str, group: Group
) -> tuple[GenerationRequest, int]:
    """``generation_request`` on a prompt thread, as /chat builds its context: counting a
    conversation's tokens takes milliseconds the loop's other requests would wait for."""
    return await runtime.build_prompt(
        lambda: generation_request(runtime, request, request_id, group)
    )


def generation_request(
    runtime: Runtime, request: ChatCompletionRequest, request_id: str, group: Group
) -> tuple[GenerationRequest, int]:
    """Check the request against the model's window and fill in defaults; with it, the
    prompt's tokens the engine will have to read (admission judges the prompt by them).
    A remote engine gets the messages and the fields kefu does not read as they came; the
    embedded engine refuses what it cannot honour (``passing.py``)."""
    engine = group.engine
    passing = passes_fields(engine)
    if not passing:
        refuse_unsupported(request)
    messages = [ChatMessage(ROLES[m.role], m.text()) for m in request.messages]
    prompt_tokens = engine.count_chat_tokens(messages)
    extra = request.model_extra or {}
    if passing and extra.get("tools"):
        # The engine reads the tools' schemas too; their JSON is about what they cost.
        prompt_tokens += engine.count_chat_tokens(
            [ChatMessage("system", json.dumps(extra["tools"], ensure_ascii=False))]
        )
    window = engine.context_window
    if prompt_tokens >= window:
        raise ContextLengthExceeded(
            f"the messages are {prompt_tokens} tokens; this model's context window is "
            f"{window} tokens, and the reply needs room too. Shorten the conversation.",
            param="messages",
        )
    wanted = request.max_completion_tokens or request.max_tokens or runtime.settings.max_tokens
    sampling = SamplingParams(
        max_tokens=min(wanted, window - prompt_tokens),
        temperature=0.7 if request.temperature is None else request.temperature,
        top_p=1.0 if request.top_p is None else request.top_p,
        stop=tuple(request.stop_list()),
        seed=request.seed,
    )
    if request.user is not None:
        extra = extra | {"user": request.user}
    generation = GenerationRequest(
        messages=messages,
        sampling=sampling,
        request_id=request_id,
        routing_key=conversation_key(messages),
        extra=extra,
        wire_messages=[wire_message(m) for m in request.messages] if passing else None,
        group=group.name,
    )
    return generation, unread_tokens(engine, messages, prompt_tokens)


def conversation_key(messages: list[ChatMessage]) -> str:
    """A digest of what stays the same turn after turn of one conversation (the system
    prompt and the first user message), for a pool's session affinity."""
    digest = hashlib.blake2b(digest_size=12)
    for message in messages:
        digest.update(f"{message.role}\x00{message.content}\x00".encode())
        if message.role == "user":
            break
    return digest.hexdigest()


def new_completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def usage_info(usage: Usage) -> UsageInfo:
    return UsageInfo(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_prompt_tokens),
    )


async def create_completion(
    runtime: Runtime, request: ChatCompletionRequest, timeline: Timeline
) -> ChatCompletion:
    group = runtime.groups.for_model(request.model)
    # Before the prompt is counted: a refusal costs ~nothing.
    with group.admission.door() as ticket:
        completion_id = new_completion_id()
        generation, unread = await checked_request(runtime, request, completion_id, group)
        timeline.outcome.tier = "llm"
        timeline.mark("context_built")
        reply = Assembled()
        finished: Finished | None = None
        async with (
            runtime.admitted(timeline, ticket, unread, group) as hold,
            aclosing(runtime.generate(generation, timeline, hold)) as events,
        ):
            async for event in events:
                if isinstance(event, TokenDelta):
                    reply.add(event.text, event.fields)
                else:
                    finished = event
    if finished is None:
        raise EngineError("the engine ended the reply without finishing it")
    timeline.mark("done")
    return ChatCompletion(
        id=completion_id,
        created=int(time.time()),
        model=request.model or group.engine.model_id,
        choices=[
            Choice(
                message=ResponseMessage(content=reply.content, **reply.message_fields()),
                finish_reason=finished.finish_reason,
                **reply.choice,
            )
        ],
        usage=usage_info(finished.usage),
        **reply.chunk,
    )


async def stream_completion(
    runtime: Runtime, request: ChatCompletionRequest, timeline: Timeline
) -> AsyncGenerator[ChatCompletionChunk, None]:
    """Chunks as OpenAI sends them: role, deltas (text, or a remote engine's tool-call
    fragments and other fields, each as it came), finish, then usage if asked.

    Admission happens before the first chunk, so a full queue is still a 503.
    """
    group = runtime.groups.for_model(request.model)
    # Before the prompt is counted: a refusal costs ~nothing.
    with group.admission.door() as ticket:
        completion_id = new_completion_id()
        generation, unread = await checked_request(runtime, request, completion_id, group)
        timeline.outcome.tier = "llm"
        timeline.mark("context_built")
        created = int(time.time())
        model = request.model or group.engine.model_id

        def chunk(delta: Delta, finish_reason: str | None = None) -> ChatCompletionChunk:
            return ChatCompletionChunk(
                id=completion_id,
                created=created,
                model=model,
                choices=[ChunkChoice(delta=delta, finish_reason=finish_reason)],
            )

        async with runtime.admitted(timeline, ticket, unread, group) as hold:
            yield chunk(Delta(role="assistant", content=""))
            async with aclosing(runtime.generate(generation, timeline, hold)) as events:
                async for event in events:
                    if isinstance(event, TokenDelta):
                        fields = event.fields
                        if fields is None:
                            yield chunk(Delta(content=event.text))
                            continue
                        yield ChatCompletionChunk(
                            id=completion_id,
                            created=created,
                            model=model,
                            choices=[
                                ChunkChoice(
                                    delta=Delta(content=event.text or None, **fields.delta),
                                    **fields.choice,
                                )
                            ],
                            **fields.chunk,
                        )
                        continue
                    yield chunk(Delta(), event.finish_reason)
                    if request.stream_options and request.stream_options.include_usage:
                        yield ChatCompletionChunk(
                            id=completion_id,
                            created=created,
                            model=model,
                            choices=[],
                            usage=usage_info(event.usage),
                        )
    timeline.mark("done")
