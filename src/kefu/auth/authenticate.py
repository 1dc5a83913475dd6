"""From a credential (API key, JWT, the chat page's token) to a Principal, or Unauthenticated.

Key records are cached for ``cache_seconds`` per process, so a request costs no
store round trip; a revoked key stops working on every replica within that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kefu.auth.keys import ApiKey, KeyStore, key_id, matches
from kefu.auth.policy import AuthMode
from kefu.auth.principal import DEFAULT_SCOPES, Principal
from kefu.auth.tokens import JwtVerifier, is_web_token, scopes_of, verify_web_token
from kefu.errors import Unauthenticated
from kefu.limits.rate import Rate

KEY_CACHE_SECONDS = 1.0


class Authenticator:
    def __init__(
        self,
        mode: AuthMode,
        keys: KeyStore,
        *,
        rate: Rate | None,
        max_streams: int,
        verifier: JwtVerifier | None = None,
        leeway: float = 30.0,
        cache_seconds: float = KEY_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = mode
        self.keys = keys
        self.rate = rate  # the server's defaults, for callers that carry none of their own
        self.max_streams = max_streams
        self.verifier = verifier
        self.leeway = leeway
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._records: dict[str, tuple[ApiKey | None, float]] = {}
        self._web_secret: bytes | None = None

    async def web_secret(self) -> bytes:
        if self._web_secret is None:
            self._web_secret = await self.keys.secret()
        return self._web_secret

    async def authenticate(self, credential: str | None) -> Principal:
        if not credential:
            raise Unauthenticated(
                "this route needs an API key: send 'Authorization: Bearer <key>' or "
                "'X-API-Key: <key>'",
                reason="missing",
            )
        if is_web_token(credential):
            claims = verify_web_token(credential, await self.web_secret(), self.leeway)
            return self._principal(f"web:{claims['sub']}", frozenset({"chat"}))
        if self.mode == "jwt":
            assert self.verifier is not None  # the app builds one for --auth jwt
            claims = self.verifier.verify(credential)
            scopes = scopes_of(claims) or frozenset(DEFAULT_SCOPES)
            return self._principal(f"jwt:{claims['sub']}", scopes)
        found = key_id(credential)
        if found is None:
            raise Unauthenticated("that is not a kefu API key", reason="malformed_key")
        record = await self._record(found)
        if not matches(credential, record):
            raise Unauthenticated("unknown API key", reason="unknown_key")
        assert record is not None
        if record.revoked_at is not None:
            raise Unauthenticated("this API key was revoked", reason="revoked")
        rate = Rate.parse(record.rate_limit) if record.rate_limit else self.rate
        streams = self.max_streams if record.max_streams is None else record.max_streams
        return Principal(f"key:{record.id}", frozenset(record.scopes), rate, streams)

    def _principal(self, subject: str, scopes: frozenset[str]) -> Principal:
        return Principal(subject, scopes, self.rate, self.max_streams)

    async def _record(self, found: str) -> ApiKey | None:
        now = self.clock()
        cached = self._records.get(found)
        if cached is not None and cached[1] > now:
            return cached[0]
        record = await self.keys.get(found)
        if len(self._records) > 10_000:  # a flood of made-up ids must not grow it forever
            self._records.clear()
        self._records[found] = (record, now + self.cache_seconds)
        return record
