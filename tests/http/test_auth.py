"""Auth at the HTTP surface, in process: API keys, JWTs, scopes, ownership, limits.

Every route is tried without a credential; then revoked keys, other callers' sessions,
and the JWTs that must be refused (expired, wrong audience, alg none, tampered).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient

from kefu.app import create_app
from kefu.auth.keys import SqliteKeyStore, new_key
from kefu.engine.fake import FakeEngine
from kefu.settings import Settings
from tests.conftest import wait_ready
from tests.http.helpers import assert_envelope, parse_sse

# Every route, with a body where it needs one: none may answer without a credential.
ROUTES: list[tuple[str, str]] = [
    ("POST", "/chat"),
    ("GET", "/sessions/abc"),
    ("DELETE", "/sessions/abc"),
    ("GET", "/sessions/abc/events"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("GET", "/agent/sessions"),
    ("GET", "/agent/sessions/abc"),
    ("POST", "/agent/sessions/abc/reply"),
    ("POST", "/agent/sessions/abc/release"),
    ("GET", "/kb"),
    ("GET", "/kb/search"),
    ("POST", "/kb/import"),
    ("POST", "/kb/entries"),
    ("GET", "/kb/entries/x"),
    ("DELETE", "/kb/entries/x"),
    ("GET", "/metrics"),
    ("GET", "/stats"),
    ("GET", "/diagnose"),
]


def make_key(data_dir: Path, scopes: tuple[str, ...], **kwargs: Any) -> tuple[str, str]:
    key, record = new_key("test", scopes, kwargs.get("rate"), kwargs.get("streams"))
    asyncio.run(SqliteKeyStore(data_dir / "keys.db").add(record))
    return key, record.id


@pytest.fixture
def keyed(settings_factory: Callable[..., Settings], fake_engine: FakeEngine) -> Callable[..., Any]:
    def start(**overrides: Any) -> Any:
        settings = settings_factory(auth="keys", **overrides)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        app = create_app(settings, engine_factory=lambda _: fake_engine)
        return settings, TestClient(app)

    return start


def chat(client: TestClient, key: str, message: str, session_id: str | None = None) -> Any:
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    return client.post("/chat", json=body, headers={"authorization": f"Bearer {key}"})


def done_of(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1].event == "done", events
    data: dict[str, Any] = events[-1].json()
    return data


def test_every_route_needs_a_key_but_probes_and_the_page(keyed: Callable[..., Any]) -> None:
    _, client = keyed()
    with client:
        wait_ready(client)
        for method, path in ROUTES:
            response = client.request(method, path, json={"message": "hi"})
            error = assert_envelope(response, 401, "unauthenticated", "authentication_error")
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert "key" in error["message"], (method, path)
        for path in ("/health", "/ready", "/"):
            assert client.get(path).status_code == 200
        metrics = client.get("/metrics", headers={"x-api-key": "kefu_000000000000_nope"})
        assert_envelope(metrics, 401, "unauthenticated")


def test_key_in_either_header_and_nothing_of_it_in_errors(
    keyed: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    settings, client = keyed()
    key, key_id = make_key(settings.data_dir, ("chat", "api"))
    with client:
        wait_ready(client)
        assert client.get("/v1/models", headers={"x-api-key": key}).status_code == 200
        assert client.get("/v1/models", headers={"authorization": f"Bearer {key}"}).is_success
        wrong = key[:-4] + "AAAA"
        response = client.get("/v1/models", headers={"x-api-key": wrong})
        assert_envelope(response, 401, "unauthenticated")
        assert key_id not in response.text
        assert key[-10:] not in response.text
    assert key[-10:] not in caplog.text
    assert wrong[-10:] not in caplog.text


def test_revoked_key_is_refused(keyed: Callable[..., Any]) -> None:
    settings, client = keyed()
    key, key_id = make_key(settings.data_dir, ("chat", "api"))
    with client:
        wait_ready(client)
        assert client.get("/v1/models", headers={"x-api-key": key}).is_success
        assert asyncio.run(SqliteKeyStore(settings.data_dir / "keys.db").revoke(key_id))
        deadline = time.monotonic() + 5
        while (response := client.get("/v1/models", headers={"x-api-key": key})).is_success:
            assert time.monotonic() < deadline, "the revoked key still works after 5 s"
            time.sleep(0.1)
        error = assert_envelope(response, 401, "unauthenticated")
        assert "revoked" in error["message"]
        metrics = client.get("/metrics", headers={"x-api-key": make_admin(settings)}).text
        assert 'kefu_auth_failures_total{reason="revoked"}' in metrics


def make_admin(settings: Settings) -> str:
    return make_key(settings.data_dir, ("admin",))[0]


def test_sessions_belong_to_their_owner(keyed: Callable[..., Any]) -> None:
    settings, client = keyed()
    alice, _ = make_key(settings.data_dir, ("chat",))
    bob, _ = make_key(settings.data_dir, ("chat",))
    admin = make_admin(settings)
    with client:
        wait_ready(client)
        session_id = done_of(chat(client, alice, "hello"))["session_id"]
        assert done_of(chat(client, alice, "again", session_id))["session_id"] == session_id
        as_bob = {"x-api-key": bob}
        for method, path in (
            ("GET", f"/sessions/{session_id}"),
            ("DELETE", f"/sessions/{session_id}"),
            ("GET", f"/sessions/{session_id}/events"),
        ):
            assert_envelope(client.request(method, path, headers=as_bob), 404, "not_found")
        assert_envelope(chat(client, bob, "mine now?", session_id), 404, "not_found")
        # The owner still has it whole; the agent desk (admin) sees every session.
        messages = client.get(f"/sessions/{session_id}", headers={"x-api-key": alice}).json()
        assert [m["content"] for m in messages["messages"] if m["role"] == "user"] == [
            "hello",
            "again",
        ]
        desk = client.get(f"/agent/sessions/{session_id}", headers={"x-api-key": admin})
        assert desk.status_code == 200
        # A chat-only key (a shop's publishable key) reaches neither /v1 nor the desk.
        for path in ("/v1/models", "/agent/sessions", "/kb"):
            response = client.get(path, headers={"x-api-key": alice})
            assert_envelope(response, 403, "forbidden", "permission_error")
            assert "insufficient_scope" in response.headers["www-authenticate"]


def test_rate_limit_429_with_headers(keyed: Callable[..., Any]) -> None:
    settings, client = keyed(rate_limit="3/60")
    key, _ = make_key(settings.data_dir, ("chat",))
    own, _ = make_key(settings.data_dir, ("chat",), rate="5/60")
    with client:
        wait_ready(client)
        first = chat(client, key, "one")
        assert first.headers["x-ratelimit-limit"] == "3"
        assert first.headers["x-ratelimit-remaining"] == "2"
        chat(client, key, "two")
        chat(client, key, "three")
        refused = chat(client, key, "four")
        error = assert_envelope(refused, 429, "rate_limited", "rate_limit_error")
        assert "3 answers per 60 s" in error["message"]
        assert 19 <= int(refused.headers["retry-after"]) <= 21  # one token per 20 s
        assert refused.headers["x-ratelimit-remaining"] == "0"
        assert int(refused.headers["x-ratelimit-reset"]) <= 60
        # Another key has its own bucket, and its own size.
        assert chat(client, own, "hi").headers["x-ratelimit-limit"] == "5"
        # Reading sessions is not an answer: it does not count.
        assert client.get("/sessions/none", headers={"x-api-key": key}).status_code == 404
        metrics = client.get("/metrics", headers={"x-api-key": make_admin(settings)}).text
        assert 'kefu_limit_rejections_total{limit="rate"} 1.0' in metrics


def test_stream_cap(keyed: Callable[..., Any], fake_engine: FakeEngine) -> None:
    fake_engine.token_delay = 0.2
    settings, client = keyed(max_streams=1)
    key, _ = make_key(settings.data_dir, ("api",))
    body = {"model": "fake", "messages": [{"role": "user", "content": "a b c d e"}], "stream": True}
    with client:
        wait_ready(client)
        headers = {"x-api-key": key}
        with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as one:
            assert one.status_code == 200
            second = client.post("/v1/chat/completions", json=body, headers=headers)
            error = assert_envelope(second, 429, "rate_limited")
            assert "1 answers are already running" in error["message"]
            one.read()
        assert client.post("/v1/chat/completions", json=body, headers=headers).is_success


def test_timeline_has_auth_and_limit_stages(keyed: Callable[..., Any]) -> None:
    settings, client = keyed()
    key, _ = make_key(settings.data_dir, ("chat",))
    with client:
        wait_ready(client)
        timings = done_of(chat(client, key, "hi"))["timings"]
        assert timings["received_at_ms"] <= timings["authenticated_at_ms"]
        assert timings["authenticated_at_ms"] <= timings["limited_at_ms"]
        assert timings["limited_at_ms"] <= timings["parsed_at_ms"]


def test_web_page_token_is_a_visitor_of_its_own(keyed: Callable[..., Any]) -> None:
    _, client = keyed()
    with client:
        wait_ready(client)

        def visitor() -> dict[str, str]:
            page = client.get("/").text
            token = page.split('<meta name="kefu-token" content="')[1].split('"')[0]
            assert token
            return {"authorization": f"Bearer {token}"}

        one, two = visitor(), visitor()
        response = client.post("/chat", json={"message": "hi"}, headers=one)
        session_id = done_of(response)["session_id"]
        assert client.get(f"/sessions/{session_id}", headers=one).status_code == 200
        assert client.get(f"/sessions/{session_id}", headers=two).status_code == 404
        token = one["authorization"].removeprefix("Bearer ")
        events = f"/sessions/{session_id}/events?access_token=other"
        assert_envelope(client.get(events), 401, "unauthenticated")
        # The page's token has the chat scope only.
        assert_envelope(client.get("/v1/models", headers=one), 403, "forbidden")
        with client.stream("GET", f"/sessions/{session_id}/events?access_token={token}") as s:
            assert s.status_code == 200


def test_auth_none_on_loopback_needs_nothing(client: TestClient) -> None:
    response = client.post("/chat", json={"message": "hi"})
    assert done_of(response)["reply"]
    assert "x-ratelimit-limit" not in response.headers
    assert 'content=""' in client.get("/").text


# --- JWT ---------------------------------------------------------------------------


@pytest.fixture
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwt_client(
    settings_factory: Callable[..., Settings],
    fake_engine: FakeEngine,
    tmp_path: Path,
    rsa_key: rsa.RSAPrivateKey,
) -> Iterator[TestClient]:
    public = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "jwt.pem").write_bytes(public)
    settings = settings_factory(
        auth="jwt",
        jwt_key=tmp_path / "jwt.pem",
        jwt_issuer="https://shop.example",
        jwt_audience="kefu",
        jwt_leeway=5,
    )
    with TestClient(create_app(settings, engine_factory=lambda _: fake_engine)) as client:
        wait_ready(client)
        yield client


def sign(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": "https://shop.example",
        "aud": "kefu",
        "sub": "user-1",
        "iat": now,
        "exp": now + 300,
        **claims,
    }
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm="RS256")


def test_jwt_subject_owns_its_sessions(jwt_client: TestClient, rsa_key: rsa.RSAPrivateKey) -> None:
    user1 = sign(rsa_key)
    session_id = done_of(chat(jwt_client, user1, "hi"))["session_id"]
    user2 = {"authorization": f"Bearer {sign(rsa_key, sub='user-2')}"}
    assert_envelope(jwt_client.get(f"/sessions/{session_id}", headers=user2), 404, "not_found")
    admin = sign(rsa_key, sub="desk", scope="admin")
    assert jwt_client.get(
        "/agent/sessions", headers={"authorization": f"Bearer {admin}"}
    ).is_success


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("expired", "expired"),
        ("not_yet", "not yet valid"),
        ("audience", "wrong audience"),
        ("issuer", "wrong issuer"),
        ("alg_none", "bad algorithm"),
        ("hs256_with_public_key", "bad algorithm"),
        ("tampered", "bad signature"),
        ("garbage", "malformed token"),
        ("no_subject", "missing claim"),
    ],
)
def test_bad_jwts_are_refused(
    jwt_client: TestClient, rsa_key: rsa.RSAPrivateKey, case: str, reason: str
) -> None:
    now = int(time.time())
    if case == "expired":
        token = sign(rsa_key, exp=now - 60)  # past the 5 s leeway
    elif case == "not_yet":
        token = sign(rsa_key, nbf=now + 60)
    elif case == "audience":
        token = sign(rsa_key, aud="someone-else")
    elif case == "issuer":
        token = sign(rsa_key, iss="https://evil.example")
    elif case == "alg_none":
        claims = {"iss": "https://shop.example", "aud": "kefu", "sub": "x", "exp": now + 60}
        token = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."
    elif case == "hs256_with_public_key":
        token = f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64({'sub': 'x'})}.c2ln"
    elif case == "tampered":
        header, _, signature = sign(rsa_key).split(".")
        forged = {"iss": "https://shop.example", "aud": "kefu", "sub": "admin", "exp": now + 60}
        token = f"{header}.{_b64({**forged, 'scope': 'admin'})}.{signature}"
    elif case == "garbage":
        token = "not-a-jwt"
    else:
        token = sign(rsa_key, sub=None)
    response = jwt_client.get("/v1/models", headers={"authorization": f"Bearer {token}"})
    error = assert_envelope(response, 401, "unauthenticated")
    assert reason in error["message"]
    assert token not in response.text
