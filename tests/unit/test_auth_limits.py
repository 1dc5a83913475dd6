"""Auth and limits with fakes: rates, the in-process bucket, keys, JWT keys, settings."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from kefu.auth.authenticate import Authenticator
from kefu.auth.keys import ApiKey, key_id, matches, new_key
from kefu.auth.tokens import JwtVerifier
from kefu.errors import Unauthenticated
from kefu.limits.bucket import LocalLimiter
from kefu.limits.rate import Rate
from kefu.settings import SettingsError, load_settings
from kefu.settings.auth_mode import auth_mode

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("text", "rate"), [("30/60", Rate(30, 60)), (" 1/0.5 ", Rate(1, 0.5)), ("off", None)]
)
def test_rate_parses(text: str, rate: Rate | None) -> None:
    assert Rate.parse(text) == rate


@pytest.mark.parametrize("text", ["30", "0/60", "30/0", "a/b", "30/-1", ""])
def test_rate_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="N/SECONDS"):
        Rate.parse(text)


async def test_bucket_refills_over_time() -> None:
    now = [0.0]
    limiter = LocalLimiter(clock=lambda: now[0])
    rate = Rate(2, 10)
    assert (await limiter.acquire("a", rate, 0, None)).remaining == 1
    assert (await limiter.acquire("a", rate, 0, None)).remaining == 0
    refused = await limiter.acquire("a", rate, 0, None)
    assert not refused.allowed
    assert refused.retry_after == pytest.approx(5.0)
    assert refused.reset == pytest.approx(10.0)
    assert (await limiter.acquire("b", rate, 0, None)).allowed  # buckets are per caller
    now[0] = 5.0
    assert (await limiter.acquire("a", rate, 0, None)).allowed
    assert not (await limiter.acquire("a", rate, 0, None)).allowed


async def test_streams_are_capped_and_a_refusal_takes_no_token() -> None:
    limiter = LocalLimiter(clock=lambda: 0.0)
    rate = Rate(3, 60)
    assert (await limiter.acquire("a", rate, 1, "s1")).allowed
    refused = await limiter.acquire("a", rate, 1, "s2")
    assert refused.refusal == "streams"
    await limiter.release("a", "s1")
    again = await limiter.acquire("a", rate, 1, "s2")
    assert again.allowed
    assert again.remaining == 1  # the refused request took nothing


def test_keys_are_kept_as_hashes_and_compared_whole() -> None:
    key, record = new_key("shop", ("chat",), None, None)
    assert key.startswith("kefu_")
    assert key not in record.to_json()
    assert key_id(key) == record.id
    assert matches(key, record)
    assert not matches(key[:-1] + ("A" if key[-1] != "A" else "B"), record)
    assert not matches(key, None)
    assert key_id("sk-something") is None
    assert ApiKey.from_json(record.to_json()) == record


class MemoryKeys:
    def __init__(self) -> None:
        self.records: dict[str, ApiKey] = {}
        self.gets = 0

    async def add(self, record: ApiKey) -> None:
        self.records[record.id] = record

    async def get(self, found: str) -> ApiKey | None:
        self.gets += 1
        return self.records.get(found)

    async def all(self) -> list[ApiKey]:
        return list(self.records.values())

    async def revoke(self, found: str) -> bool:
        return False

    async def secret(self) -> bytes:
        return b"s" * 32


async def test_key_lookups_are_cached_briefly() -> None:
    keys = MemoryKeys()
    key, record = new_key("shop", ("chat",), "5/60", 2)
    await keys.add(record)
    now = [0.0]
    auth = Authenticator("keys", keys, rate=Rate(30, 60), max_streams=4, clock=lambda: now[0])
    principal = await auth.authenticate(key)
    assert (principal.subject, principal.rate, principal.max_streams) == (
        f"key:{record.id}",
        Rate(5, 60),
        2,
    )
    await auth.authenticate(key)
    assert keys.gets == 1
    now[0] = 2.0
    await auth.authenticate(key)
    assert keys.gets == 2
    with pytest.raises(Unauthenticated) as refused:
        await auth.authenticate("kefu_ffffffffffff_" + "x" * 43)
    assert refused.value.reason == "unknown_key"


def test_hs256_secret_and_jwks_files(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("a-long-shared-secret-of-the-shop-32b")
    verifier = JwtVerifier(
        key_file=tmp_path / "secret", jwks_file=None, issuer=None, audience=None, leeway=0
    )
    assert verifier.algorithms == ["HS256"]
    token = jwt.encode(
        {"sub": "u", "exp": int(time.time()) + 60},
        b"a-long-shared-secret-of-the-shop-32b",
        algorithm="HS256",
    )
    assert verifier.verify(token)["sub"] == "u"

    private = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1"}]}))
    by_set = JwtVerifier(
        key_file=None, jwks_file=tmp_path / "jwks.json", issuer=None, audience=None, leeway=0
    )
    signed = jwt.encode(
        {"sub": "v", "exp": int(time.time()) + 60},
        private,
        algorithm="ES256",
        headers={"kid": "k1"},
    )
    assert by_set.verify(signed)["sub"] == "v"
    unknown = jwt.encode(
        {"sub": "v", "exp": int(time.time()) + 60},
        private,
        algorithm="ES256",
        headers={"kid": "k9"},
    )
    with pytest.raises(Unauthenticated, match="unknown key"):
        by_set.verify(unknown)


def test_auth_defaults_to_keys_off_loopback() -> None:
    assert auth_mode(load_settings({"host": "127.0.0.1"}, environ={})) == "none"
    assert auth_mode(load_settings({"host": "0.0.0.0"}, environ={})) == "keys"
    with pytest.raises(SettingsError, match="--insecure"):
        load_settings({"host": "0.0.0.0", "auth": "none"}, environ={})
    assert load_settings({"host": "0.0.0.0", "auth": "none", "insecure": True}, environ={})
    with pytest.raises(SettingsError, match="jwt-key"):
        load_settings({"auth": "jwt"}, environ={})
    with pytest.raises(SettingsError, match="N/SECONDS"):
        load_settings({"rate_limit": "lots"}, environ={})
    with pytest.raises(SettingsError, match="redis://"):
        load_settings({"redis": "localhost:6379"}, environ={})


@pytest.mark.parametrize(("later", "kept"), [(0.5, 4096), (2.0, 1)])
async def test_buckets_that_are_full_again_are_forgotten(later: float, kept: int) -> None:
    now = [0.0]
    limiter = LocalLimiter(clock=lambda: now[0])
    for i in range(4095):  # a bucket of one, full again a second after its request
        await limiter.acquire(f"caller {i}", Rate(1, 1), 0, None)
    now[0] = later  # the next new caller finds a round number and sweeps
    await limiter.acquire("new", Rate(1, 60), 0, None)
    assert len(limiter._buckets) == kept
