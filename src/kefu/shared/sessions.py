"""Session store on Redis, shared by every replica (``--redis``).

A session is a hash (``kefu:session:<id>``) and its messages a list
(``kefu:messages:<id>``) of ``<turn>\\t<json>`` entries; handed-off sessions are
also in a sorted set by the time they were handed off. Every write is one Lua
script, so a turn is stored whole or not at all, and renews both keys' TTL
(--session-ttl): a session leaves Redis that long after its last message.
Each call is bounded by --redis-timeout and fails as StateUnavailable (503).
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis.asyncio import Redis

from kefu.shared.client import RedisClient
from kefu.store.base import Session, SessionMemory, SessionState, StoredMessage, Turn

HANDOFF = "kefu:handoff"

# Sets state, reason and state_since (kept when the state does not change), and the
# handoff index. Expects KEYS[1] = session, KEYS[3] = handoff index, ARGV[1] = now.
_SET_STATE = """
local function set_state(id, state, reason)
  local current = redis.call('HGET', KEYS[1], 'state')
  if current ~= state then
    redis.call('HSET', KEYS[1], 'state_since', ARGV[1])
  end
  redis.call('HSET', KEYS[1], 'state', state, 'state_reason', reason)
  if state == '"handoff"' then
    redis.call('ZADD', KEYS[3], 'NX', ARGV[1], id)
  else
    redis.call('ZREM', KEYS[3], id)
  end
end
"""

# ARGV: now, id, user_id, owner, user message, assistant message, ttl, state, reason
APPEND_TURN = (
    _SET_STATE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'user_id', ARGV[3], 'owner', ARGV[4], 'created_at', ARGV[1],
             'state', '"bot"', 'state_reason', 'null', 'state_since', 'null', 'turn', 0)
end
local turn = redis.call('HINCRBY', KEYS[1], 'turn', 1)
redis.call('RPUSH', KEYS[2], turn .. '\\t' .. ARGV[5], turn .. '\\t' .. ARGV[6])
redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
if ARGV[8] ~= '' then set_state(ARGV[2], ARGV[8], ARGV[9]) end
redis.call('EXPIRE', KEYS[1], ARGV[7])
redis.call('EXPIRE', KEYS[2], ARGV[7])
return turn
"""
)

# ARGV: now, id, message, ttl. Returns the turn it is filed under, or -1: no session.
APPEND_MESSAGE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local turn = redis.call('HGET', KEYS[1], 'turn')
redis.call('RPUSH', KEYS[2], turn .. '\\t' .. ARGV[3])
redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return tonumber(turn)
"""

# ARGV: now, id, state, reason. Returns the session's fields, or an empty list.
SET_STATE = (
    _SET_STATE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
set_state(ARGV[2], ARGV[3], ARGV[4])
redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
return redis.call('HGETALL', KEYS[1])
"""
)

# KEYS: session, memory; ARGV: body, ttl. Written only while the session exists: a summary
# finishing after a delete must not leave a memory behind. Returns 1 when written.
SAVE_MEMORY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return 1
"""


def _memory_key(session_id: str) -> str:
    return f"kefu:memory:{session_id}"


def _keys(session_id: str) -> list[str]:
    return [f"kefu:session:{session_id}", f"kefu:messages:{session_id}", HANDOFF]


class RedisSessionStore:
    def __init__(self, client: RedisClient, ttl: float) -> None:
        self.client = client
        self.ttl = max(1, int(ttl))
        redis = client.redis
        self._append_turn = redis.register_script(APPEND_TURN)
        self._append_message = redis.register_script(APPEND_MESSAGE)
        self._set_state = redis.register_script(SET_STATE)
        self._save_memory = redis.register_script(SAVE_MEMORY)

    async def open(self) -> None:
        return None  # the pool connects on first use; a Redis that is down is a 503 then

    async def close(self) -> None:
        return None  # the client is closed by its owner, the app's lifespan

    async def get_session(self, session_id: str) -> Session | None:
        fields = await self.client.call(
            "session.get", lambda r: r.hgetall(f"kefu:session:{session_id}")
        )
        return _session(session_id, fields)

    async def recent_turns(self, session_id: str, turns: int) -> list[StoredMessage]:
        return (await self.resume(session_id, turns))[1]

    async def resume(
        self, session_id: str, turns: int
    ) -> tuple[Session | None, list[StoredMessage]]:
        session_key, messages_key, _ = _keys(session_id)

        async def read(r: Redis) -> list[Any]:
            pipe = r.pipeline(transaction=True)
            pipe.hgetall(session_key)
            pipe.lrange(messages_key, 0, -1)
            return list(await pipe.execute())

        fields, raw = await self.client.call("session.resume", read)
        session = _session(session_id, fields)
        if session is None or turns <= 0:
            return session, []
        messages = [_message(m) for m in raw]
        last = messages[-1].turn if messages else 0
        return session, [m for m in messages if m.turn > last - turns]

    async def messages(self, session_id: str) -> list[StoredMessage]:
        raw = await self.client.call(
            "session.messages", lambda r: r.lrange(f"kefu:messages:{session_id}", 0, -1)
        )
        return [_message(m) for m in raw]

    async def append_turn(
        self, session_id: str, turn: Turn, user_id: str | None = None, owner: str | None = None
    ) -> int:
        now = time.time()
        args: list[str | int] = [
            repr(now),
            session_id,
            json.dumps(user_id),
            json.dumps(owner),
            _encode("user", turn.user, now, {}),
            _encode("assistant", turn.assistant, now, turn.meta),
            self.ttl,
            json.dumps(turn.state) if turn.state is not None else "",
            json.dumps(turn.state_reason),
        ]
        number = await self.client.call(
            "session.append_turn", lambda r: self._append_turn(keys=_keys(session_id), args=args)
        )
        return int(number)

    async def delete_session(self, session_id: str) -> bool:
        session_key, messages_key, index = _keys(session_id)

        async def delete(r: Redis) -> list[Any]:
            pipe = r.pipeline(transaction=True)
            pipe.delete(session_key, messages_key, _memory_key(session_id))
            pipe.zrem(index, session_id)
            return list(await pipe.execute())

        deleted, _ = await self.client.call("session.delete", delete)
        return int(deleted) > 0

    async def append_message(
        self, session_id: str, content: str, meta: dict[str, Any]
    ) -> StoredMessage | None:
        now = time.time()
        args: list[str | int] = [
            repr(now),
            session_id,
            _encode("assistant", content, now, meta),
            self.ttl,
        ]
        turn = await self.client.call(
            "session.append_message",
            lambda r: self._append_message(keys=_keys(session_id), args=args),
        )
        if int(turn) < 0:
            return None
        return StoredMessage("assistant", content, now, meta, int(turn))

    async def set_state(
        self, session_id: str, state: SessionState, reason: str | None = None
    ) -> Session | None:
        args = [repr(time.time()), session_id, json.dumps(state), json.dumps(reason)]
        flat = await self.client.call(
            "session.set_state", lambda r: self._set_state(keys=_keys(session_id), args=args)
        )
        return _session(session_id, dict(zip(flat[::2], flat[1::2], strict=True)))

    async def sessions_in_state(self, state: SessionState, limit: int = 100) -> list[Session]:
        """Only handed-off sessions are indexed (the agent desk's queue); a session that
        expired meanwhile is dropped from the index here."""
        if state != "handoff":
            raise ValueError("the Redis store indexes handed-off sessions only")
        ids = await self.client.call("session.waiting", lambda r: r.zrange(HANDOFF, 0, limit - 1))
        found = []
        for session_id in (_text(raw) for raw in ids):
            session = await self.get_session(session_id)
            if session is None or session.state != "handoff":
                await self._forget_waiting(session_id)
            else:
                found.append(session)
        return found

    async def _forget_waiting(self, session_id: str) -> None:
        await self.client.call("session.waiting", lambda r: r.zrem(HANDOFF, session_id))

    async def load_memory(self, session_id: str) -> SessionMemory | None:
        raw = await self.client.call("memory.get", lambda r: r.get(_memory_key(session_id)))
        return SessionMemory.from_dict(json.loads(raw)) if raw else None

    async def save_memory(self, session_id: str, memory: SessionMemory) -> bool:
        keys = [f"kefu:session:{session_id}", _memory_key(session_id)]
        args: list[str | int] = [json.dumps(memory.as_dict()), self.ttl]
        written = await self.client.call(
            "memory.save", lambda r: self._save_memory(keys=keys, args=args)
        )
        return int(written) == 1


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _encode(role: str, content: str, now: float, meta: dict[str, Any]) -> str:
    return json.dumps({"role": role, "content": content, "created_at": now, "meta": meta})


def _message(raw: Any) -> StoredMessage:
    turn, _, body = bytes(raw).partition(b"\t")
    data = json.loads(body)
    return StoredMessage(data["role"], data["content"], data["created_at"], data["meta"], int(turn))


def _session(session_id: str, fields: Any) -> Session | None:
    if not fields:
        return None
    value = {bytes(k).decode(): json.loads(v) for k, v in fields.items()}
    return Session(
        id=session_id,
        user_id=value.get("user_id"),
        created_at=value["created_at"],
        updated_at=value.get("updated_at", value["created_at"]),
        state=value.get("state", "bot"),
        state_reason=value.get("state_reason"),
        state_since=value.get("state_since"),
        owner=value.get("owner"),
    )
