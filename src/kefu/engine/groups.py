"""Model groups: several pools of remote engines, one per model, behind one Engine.

A shop may serve FAQ, orders and logistics with three small models behind an intent
classifier instead of one big model: less memory, more throughput. Each group is
an ``EnginePool`` with its own routing and breakers; ``GenerationRequest.group`` says which
answers. Which group a request goes to is the service's choice (``service/groups.py``: by
the turn's intent, by the /v1 model name); this class only holds them and names them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence

from kefu.engine.base import ChatMessage, EngineStats, GenerationEvent, GenerationRequest
from kefu.engine.engines_file import GroupSpec
from kefu.engine.pool import EnginePool


class EngineGroups:
    """Every remote engine kefu has, grouped (one group where no engines file names more).
    ``generate`` hands back the group's own stream: no layer of its own per token."""

    passes_fields = True

    def __init__(
        self, pools: Mapping[str, EnginePool], specs: Mapping[str, GroupSpec], default: str
    ) -> None:
        self.pools = dict(pools)
        self.specs = dict(specs)
        self.default = default

    @property
    def default_pool(self) -> EnginePool:
        return self.pools[self.default]

    # The default group stands for the whole where one model is asked for (/ready, a
    # summary's prompt); requests name their group.
    @property
    def model_id(self) -> str:
        return self.default_pool.model_id

    @property
    def context_window(self) -> int:
        return self.default_pool.context_window

    @property
    def accepting(self) -> bool:
        return self.default_pool.accepting

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.default_pool.count_chat_tokens(messages)

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        return self.pools[request.group or self.default].generate(request)

    async def start(self) -> None:
        await asyncio.gather(*(pool.start() for pool in self.pools.values()))

    async def close(self) -> None:
        await asyncio.gather(*(pool.close() for pool in self.pools.values()))

    def stats(self) -> EngineStats:
        stats = [pool.stats() for pool in self.pools.values()]
        return EngineStats(
            running=sum(s.running for s in stats),
            background=sum(s.background for s in stats),
            slots=sum(s.slots for s in stats),
            engines=tuple(row for s in stats for row in s.engines),
            token_counting=stats[0].token_counting
            if len(stats) == 1
            else "; ".join(
                f"{name}: {s.token_counting}" for name, s in zip(self.pools, stats, strict=True)
            ),
        )
