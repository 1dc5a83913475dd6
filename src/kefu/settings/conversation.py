"""Settings of conversations: the persona, the turns kept, the memory of older ones."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from kefu.settings.group import SettingsGroup

DEFAULT_PERSONA = (
    "You are a friendly, concise customer-service assistant for an online shop. "
    "Answer in the customer's language, in a few sentences. If you do not know "
    "something, say so and offer to connect the customer with a human agent."
)


class ConversationSettings(SettingsGroup):
    """Conversations: the persona, the turns kept and the memory of older ones."""

    heading: ClassVar[str] = "conversations"

    persona: str = Field(
        DEFAULT_PERSONA,
        description="System prompt for /chat: the text itself, or @PATH to read it from a file.",
    )
    history_turns: int = Field(
        3,
        ge=0,
        description="Earlier turns (user + assistant) /chat puts in the prompt: at least "
        "this many, up to this + --memory-every - 1, as old turns leave in blocks.",
    )
    session_wait: float = Field(
        10.0,
        gt=0,
        description="Seconds a turn waits while another turn on the same session runs, "
        "before it fails with 409.",
    )
    memory: Literal["summary", "window"] = Field(
        "summary",
        description="What /chat keeps of turns older than --history-turns: 'summary' (a "
        "rolling summary plus facts such as order numbers, built in the background) or "
        "'window' (nothing: they leave the prompt).",
    )
    memory_every: int = Field(
        3,
        ge=1,
        description="Turns between folds of old turns into the memory (--memory summary) "
        "or out of the prompt (--memory window); the prompt grows by appending in between, "
        "so the prefix cache reuses the conversation's KV.",
    )
    read_ahead: bool = Field(
        True,
        description="After a turn the fast path answered, read the conversation so far "
        "into the embedded engine's KV in its idle steps (never ahead of a customer), so "
        "the next turn the model answers reads only its new message.",
    )
    summary_tokens: int = Field(
        150,
        ge=16,
        le=1024,
        description="--memory summary: the summary's length cap, in tokens (the model's, and "
        "the customer's sentences code quotes until the model's is ready).",
    )
    summary_timeout: float = Field(
        60.0,
        gt=0,
        description="--memory summary: seconds the model's summary may take (it waits while "
        "customers are served); a late one is dropped, the quotes stay, and the next fold "
        "asks again.",
    )

    @field_validator("persona")
    @classmethod
    def _read_persona_file(cls, value: str) -> str:
        if value.startswith("@"):
            path = Path(value[1:]).expanduser()
            try:
                value = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"cannot read persona file {path}: {exc.strerror}") from exc
        value = value.strip()
        if not value:
            raise ValueError("persona is empty")
        return value
