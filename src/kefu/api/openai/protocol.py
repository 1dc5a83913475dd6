"""Wire models of the OpenAI chat-completions API.

Known fields are strict where kefu reads them, as OpenAI's are and as the document says:
``"5"``, ``5.0`` or ``true`` is not a max_tokens. Everything else is accepted and kept: a
remote engine receives the request's other fields (tools, tool_choice, response_format,
logprobs...) and its messages (tool calls, tool results, image parts) as they came, and
its replies' fields come back the same way (``extra="allow"`` on the response models). The
embedded engine refuses what it cannot honour (``serving.unsupported_field``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MessageRole = Literal["system", "developer", "user", "assistant", "tool"]


class ContentPart(BaseModel):
    """A part of a message's content: text kefu reads, anything else (an image, audio,
    a file) passed on to a remote engine as it came."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_has_text(self) -> ContentPart:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part needs 'text', a string")
        return self


class RequestMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    role: MessageRole
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text: what kefu counts and routes on. An assistant's tool calls
        count as their JSON (the engine reads them too); other parts count nothing."""
        content = self.content
        text = (
            ""
            if content is None
            else content
            if isinstance(content, str)
            else "".join(part.text or "" for part in content if part.type == "text")
        )
        if self.model_extra and "tool_calls" in self.model_extra:
            text += json.dumps(self.model_extra["tool_calls"], ensure_ascii=False)
        return text


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    model: str = ""
    messages: Annotated[list[RequestMessage], Field(min_length=1)]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    seed: int | None = None
    n: Annotated[int, Field(ge=1, le=1)] | None = None
    user: str | None = None

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> list[str] | None:
        if value is None:
            return None
        stops = [value] if isinstance(value, str) else value
        return [s for s in stops if s]

    def stop_list(self) -> list[str]:
        # The validator has normalised str -> list.
        return list(self.stop or [])


class ResponseMessage(BaseModel):
    # A remote engine's other message fields (tool_calls, refusal...) are kept.
    model_config = ConfigDict(extra="allow")
    role: Literal["assistant"] = "assistant"
    # None when the reply is tool calls only, as OpenAI's is.
    content: str | None


class Choice(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int = 0
    message: ResponseMessage
    finish_reason: str
    logprobs: Any = None  # a remote engine's, as it sent them


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class UsageInfo(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)


class ChatCompletion(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: UsageInfo


class Delta(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int = 0
    delta: Delta
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageInfo | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "kefu"
    meta: dict[str, Any] = Field(default_factory=dict)


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
