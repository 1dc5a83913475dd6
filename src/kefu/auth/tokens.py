"""JWT bearer tokens (PyJWT): the shop's own (``--auth jwt``) and the chat page's.

Only the algorithms the configured key can verify are accepted (HS256 for a
secret, RS*/ES* for a public key), so ``alg: none`` and algorithm confusion are
refused before any signature is checked. Issuer, audience, expiry and not-before
are checked with --jwt-leeway seconds of skew.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from kefu.errors import Unauthenticated

WEB_ISSUER = "kefu-web"
WEB_TOKEN_SECONDS = 3600
_REASONS: list[tuple[type[Exception], str]] = [
    (jwt.ExpiredSignatureError, "expired"),
    (jwt.ImmatureSignatureError, "not_yet_valid"),
    (jwt.InvalidAudienceError, "wrong_audience"),
    (jwt.InvalidIssuerError, "wrong_issuer"),
    (jwt.MissingRequiredClaimError, "missing_claim"),
    (jwt.InvalidSignatureError, "bad_signature"),
    (jwt.DecodeError, "malformed_token"),
]


def _refuse(reason: str) -> Unauthenticated:
    return Unauthenticated(
        f"the bearer token is not valid ({reason.replace('_', ' ')})", reason=reason
    )


class JwtVerifier:
    def __init__(
        self,
        *,
        key_file: Path | None,
        jwks_file: Path | None,
        issuer: str | None,
        audience: str | None,
        leeway: float,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self._keys: dict[str | None, Any] = {}
        self.algorithms: list[str] = []
        if jwks_file is not None:
            for jwk in jwt.PyJWKSet.from_json(jwks_file.read_text()).keys:
                self._keys[jwk.key_id] = jwk.key
                self.algorithms.extend(_algorithms_for(jwk.key))
        elif key_file is not None:
            raw = key_file.read_bytes()
            key: Any = (
                load_pem_public_key(raw) if raw.lstrip().startswith(b"-----BEGIN") else raw.strip()
            )
            self._keys[None] = key
            self.algorithms = _algorithms_for(key)
        self.algorithms = sorted(set(self.algorithms))

    def verify(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise _refuse("malformed_token") from None
        if header.get("alg") not in self.algorithms:
            raise _refuse("bad_algorithm")
        key = self._keys.get(header.get("kid")) if header.get("kid") else None
        if key is None:
            key = self._keys.get(None) if None in self._keys else None
        if key is None:
            raise _refuse("unknown_key")
        return _decode(
            token,
            key,
            self.algorithms,
            issuer=self.issuer,
            audience=self.audience,
            leeway=self.leeway,
        )


def _algorithms_for(key: Any) -> list[str]:
    if isinstance(key, bytes):
        return ["HS256"]
    if isinstance(key, rsa.RSAPublicKey):
        return ["RS256", "RS384", "RS512"]
    if isinstance(key, ec.EllipticCurvePublicKey):
        return ["ES256", "ES384", "ES512"]
    raise ValueError(f"unsupported JWT key type {type(key).__name__}")


def _decode(
    token: str,
    key: Any,
    algorithms: list[str],
    *,
    issuer: str | None,
    audience: str | None,
    leeway: float,
) -> dict[str, Any]:
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=algorithms,
            issuer=issuer,
            audience=audience,
            leeway=leeway,
            options={"require": ["exp", "sub"], "verify_aud": audience is not None},
        )
    except jwt.InvalidTokenError as exc:
        reason = next((r for cls, r in _REASONS if isinstance(exc, cls)), "invalid_token")
        raise _refuse(reason) from None
    return claims


def scopes_of(claims: dict[str, Any]) -> frozenset[str] | None:
    """The token's 'scope' (space-separated, as OAuth writes it) or 'scopes' list."""
    value = claims.get("scope", claims.get("scopes"))
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(str(v) for v in value)
    return None


def issue_web_token(secret: bytes, now: float | None = None) -> str:
    """A token for one visitor of the chat page: its own subject (so its sessions are
    its own), the chat scope only, an hour long."""
    now = time.time() if now is None else now
    claims = {
        "iss": WEB_ISSUER,
        "sub": secrets.token_hex(12),
        "scope": "chat",
        "iat": int(now),
        "exp": int(now) + WEB_TOKEN_SECONDS,
    }
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": WEB_ISSUER})


def is_web_token(token: str) -> bool:
    try:
        return jwt.get_unverified_header(token).get("kid") == WEB_ISSUER
    except jwt.DecodeError:
        return False


def verify_web_token(token: str, secret: bytes, leeway: float) -> dict[str, Any]:
    return _decode(token, secret, ["HS256"], issuer=WEB_ISSUER, audience=None, leeway=leeway)
