"""API keys in Redis: one JSON record per key, and the set of their ids."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict

from kefu.auth.keys import ApiKey
from kefu.shared.client import RedisClient

IDS = "kefu:keys"
SECRET = "kefu:secret:web"


def _key(key_id: str) -> str:
    return f"kefu:key:{key_id}"


class RedisKeyStore:
    def __init__(self, client: RedisClient) -> None:
        self.client = client

    async def add(self, record: ApiKey) -> None:
        async def add(r: object) -> None:
            pipe = self.client.redis.pipeline(transaction=True)
            pipe.set(_key(record.id), record.to_json())
            pipe.sadd(IDS, record.id)
            await pipe.execute()

        await self.client.call("keys.add", add)

    async def get(self, key_id: str) -> ApiKey | None:
        raw = await self.client.call("keys.get", lambda r: r.get(_key(key_id)))
        return ApiKey.from_json(raw) if raw is not None else None

    async def all(self) -> list[ApiKey]:
        ids = await self.client.call("keys.list", lambda r: r.smembers(IDS))
        records = [await self.get(i.decode() if isinstance(i, bytes) else i) for i in ids]
        return sorted((r for r in records if r is not None), key=lambda k: k.created_at)

    async def revoke(self, key_id: str) -> bool:
        record = await self.get(key_id)
        if record is None or record.revoked_at is not None:
            return False
        revoked = ApiKey(**{**asdict(record), "revoked_at": time.time()})
        await self.client.call("keys.revoke", lambda r: r.set(_key(key_id), revoked.to_json()))
        return True

    async def secret(self) -> bytes:
        await self.client.call(
            "keys.secret", lambda r: r.set(SECRET, secrets.token_bytes(32), nx=True)
        )
        value = await self.client.call("keys.secret", lambda r: r.get(SECRET))
        assert isinstance(value, bytes)  # set just above, if it was not there
        return value
