"""The words around a session's memory: the summariser's prompt and the prompt block."""

from __future__ import annotations

from collections.abc import Sequence

from kefu.engine.base import ChatMessage
from kefu.store.base import SessionMemory

SUMMARISER = (
    "You summarise a customer-service conversation for the agent who continues it. "
    "In at most {words} words, state the customer's problem, the product, and what was "
    "already promised or tried. Keep order numbers, sizes and names exactly as written. "
    "Write only the summary."
)

FACT_LABELS = {
    "opening": "The customer's first message",
    "order_numbers": "Order numbers",
    "sizes": "Sizes",
    "emails": "E-mail",
    "language": "Language",
}


def summary_prompt(
    previous: str, turns: Sequence[Sequence[ChatMessage]], words: int
) -> list[ChatMessage]:
    """Fold ``turns`` into ``previous``: the summary grows with the conversation, each
    update reads only the turns that left the window since the last one."""
    lines = []
    if previous:
        lines.append(f"Summary so far: {previous}")
    for turn in turns:
        for message in turn:
            who = "Customer" if message.role == "user" else "Agent"
            lines.append(f"{who}: {message.content}")
    return [
        ChatMessage("system", SUMMARISER.format(words=words)),
        ChatMessage("user", "\n".join(lines)),
    ]


def memory_block(memory: SessionMemory | None) -> str:
    """What the reply's prompt says of the earlier conversation; "" when nothing is known."""
    if memory is None:
        return ""
    lines = [
        f"- {FACT_LABELS.get(kind, kind)}: {', '.join(values)}"
        for kind, values in memory.facts.items()
        if values and kind != "language"
    ]
    if memory.summary:
        lines.append(f"- Summary: {memory.summary}")
    if not lines:
        return ""
    return "Earlier in this conversation (keep these facts exactly):\n" + "\n".join(lines)
