"""The start of a session's next prompt read into an engine's KV ahead of its turn.

A session's prompt starts with the system prompt (the persona and the memory's block)
and the turns it keeps. Where those change outside a model turn (a fold of the memory,
turns the fast path answered), the next model turn would read them all before its first
token; read ahead, one generated token thrown away, they sit in the engine's prefix cache
and the turn reads only what is new. Used by the memory's fold (``keeper.py``) and by the
read ahead after fast-path turns (``service/read_ahead.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kefu.engine.base import ChatMessage, Engine, GenerationRequest, SamplingParams
from kefu.memory.context import system_prompt
from kefu.memory.render import memory_block
from kefu.store.base import SessionMemory


async def prefill_next_prompt(
    engine: Engine,
    *,
    persona: str,
    memory: SessionMemory | None,
    turns: Sequence[Sequence[ChatMessage]],
    request_id: str,
    routing_key: str,
    background: bool = False,
) -> None:
    """Read [system prompt with ``memory``'s block, ``turns``] into ``engine``'s KV.
    ``routing_key``: the session's, so a pool reads it on the engine its turns use;
    ``background``: run only in steps no customer needs (engines that can). Raises what
    the engine raises."""
    system = ChatMessage("system", system_prompt(persona, memory_block(memory)))
    request = GenerationRequest(
        messages=[system, *(m for turn in turns for m in turn)],
        sampling=SamplingParams(max_tokens=1, temperature=0),
        request_id=request_id,
        routing_key=routing_key,
        background=background,
    )
    async for _ in engine.generate(request):
        pass
