"""The caller a request is made for, as auth found it."""

from __future__ import annotations

from dataclasses import dataclass

from kefu.limits.rate import Rate

# chat: POST /chat and the customer's own sessions; api: /v1 and reading the knowledge
# base; admin: everything (agent desk, knowledge-base writes, metrics and stats).
SCOPES = ("chat", "api", "admin")
DEFAULT_SCOPES = ("chat", "api")


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str  # "key:<id>", "jwt:<sub>" or "web:<random>": limits and ownership key on it
    scopes: frozenset[str]
    rate: Rate | None  # None: not limited
    max_streams: int  # 0: no cap

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes

    @property
    def owner(self) -> str | None:
        """The owner a session is checked against; None sees every session (the agent desk)."""
        return None if "admin" in self.scopes else self.subject
