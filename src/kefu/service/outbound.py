"""Conversations that live on another platform (a WeChat channel): a human agent's reply
is sent there as well as to the customer's open streams."""

from __future__ import annotations

import logging
from typing import Protocol

from kefu.errors import KefuError
from kefu.store.base import Session

log = logging.getLogger("kefu.service")


class Outbound(Protocol):
    def reaches(self, session_id: str) -> bool:
        """The session is one of this platform's conversations."""
        ...

    async def deliver(self, session: Session, text: str) -> None:
        """Send ``text`` to the session's customer; KefuError when it was not sent."""
        ...


async def deliver_outbound(outbound: list[Outbound], session: Session, text: str) -> int:
    """How many platforms took the message (0 or 1); a failure is logged, not raised: the
    reply is stored, and the agent sees it was not delivered."""
    delivered = 0
    for platform in outbound:
        if not platform.reaches(session.id):
            continue
        try:
            await platform.deliver(session, text)
        except KefuError as exc:
            log.error("an agent's reply to %s was not delivered: %s", session.id, exc.message)
            continue
        delivered += 1
    return delivered
