"""A session a human agent owns: what the bot still says while the customer waits."""

from __future__ import annotations

from datetime import UTC, datetime

from kefu.fastpath.hours import ServiceHours
from kefu.fastpath.router import Routing
from kefu.service.plan import Plan

WAITING = Routing(
    intent="handoff", confidence=1.0, margin=1.0, candidates=(), reason="waiting for an agent"
)


def availability(hours: ServiceHours, lang: str = "en") -> tuple[bool, str]:
    """Whether agents work now, and when they do, in the customer's language."""
    return hours.is_open(datetime.now(UTC)), hours.describe(lang)


def waiting_plan(lang: str, hours: ServiceHours) -> Plan:
    """The bot stays out of a conversation a human owns; it only says the message arrived
    (in ``lang``, the language the turn read in the customer's message)."""
    is_open, when = availability(hours, lang)
    if lang == "zh":
        reply = (
            "已收到您的消息，人工客服会在这里回复您。"
            if is_open
            else f"已收到您的消息。人工客服的工作时间是{when}，届时会在这里回复您。"
        )
    else:
        reply = (
            "Got it — a human agent will reply here."
            if is_open
            else f"Got it — our agents work {when}; a human will reply here then."
        )
    return Plan(WAITING, lang, "handoff", reply)
