"""Who may make a request, and whether their limits let it through: before the session lock.

Without auth (``--auth none``, loopback only) nobody is limited: there is no
identity to key a limit on that a client could not change at will (a header) or
that a proxy does not share (the client address), and the benchmarks and a local
`kefu serve` must not be throttled. With auth, every answer counts, fast-path
answers included: a flood of cheap answers is still a flood.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from kefu.auth.authenticate import Authenticator
from kefu.auth.principal import Principal
from kefu.errors import Forbidden, RateLimited
from kefu.limits.bucket import Decision, Limiter
from kefu.observe.timeline import Timeline

log = logging.getLogger("kefu.auth")


@dataclass(frozen=True, slots=True)
class Admitted:
    principal: Principal
    decision: Decision
    stream: str | None  # the ticket to give back when the answer ends


@dataclass
class Access:
    authenticator: Authenticator
    limiter: Limiter

    async def admit(
        self, credential: str | None, scope: str, answer: bool, timeline: Timeline
    ) -> Admitted:
        """Raises Unauthenticated, Forbidden or RateLimited; marks "authenticated" and, for
        an answer, "limited"."""
        principal = await self.authenticator.authenticate(credential)
        timeline.mark("authenticated")
        if not principal.allows(scope):
            raise Forbidden(f"this key or token lacks the '{scope}' scope this route needs")
        if not answer:
            return Admitted(principal, Decision(True, 0, 0, 0.0, 0.0), None)
        stream = uuid.uuid4().hex if principal.max_streams else None
        decision = await self.limiter.acquire(
            principal.subject, principal.rate, principal.max_streams, stream
        )
        timeline.mark("limited")
        if not decision.allowed:
            if decision.refusal == "streams":
                message = f"{principal.max_streams} answers are already running for this caller"
            else:
                assert principal.rate is not None  # only a bucket refuses for the rate
                message = (
                    f"rate limit reached: {principal.rate.requests} answers per "
                    f"{principal.rate.seconds:g} s for this caller"
                )
            raise RateLimited(
                message,
                refusal=decision.refusal or "rate",
                retry_after=decision.retry_after,
                limit=decision.limit,
                remaining=decision.remaining,
                reset=decision.reset,
            )
        return Admitted(principal, decision, stream)

    async def done(self, admitted: Admitted) -> None:
        if admitted.stream is not None:
            await self.limiter.release(admitted.principal.subject, admitted.stream)
