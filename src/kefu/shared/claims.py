"""Agents' claims on handed-off conversations across replicas: one Redis key per claim."""

from __future__ import annotations

from kefu.sessions.claims import CLAIM_SECONDS
from kefu.shared.client import RedisClient

# Take the claim when it is free or already ours (renewing it); either way say who holds it.
TAKE = """
local holder = redis.call('GET', KEYS[1])
if (not holder) or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
return holder
"""


def _key(session_id: str) -> str:
    return f"kefu:claim:{session_id}"


class RedisClaims:
    def __init__(self, client: RedisClient, seconds: float = CLAIM_SECONDS) -> None:
        self.client = client
        self.ms = int(seconds * 1000)
        self._take = client.redis.register_script(TAKE)

    async def take(self, session_id: str, agent: str) -> str:
        holder = await self.client.call(
            "claim", lambda r: self._take(keys=[_key(session_id)], args=[agent, self.ms])
        )
        return holder.decode() if isinstance(holder, bytes) else str(holder)

    async def holders(self, session_ids: list[str]) -> dict[str, str]:
        if not session_ids:
            return {}
        values = await self.client.call(
            "claims", lambda r: r.mget([_key(sid) for sid in session_ids])
        )
        return {
            sid: value.decode() if isinstance(value, bytes) else str(value)
            for sid, value in zip(session_ids, values, strict=True)
            if value is not None
        }

    async def drop(self, session_id: str) -> None:
        await self.client.call("unclaim", lambda r: r.delete(_key(session_id)))
