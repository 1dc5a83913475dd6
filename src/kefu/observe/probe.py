"""A short, bounded probe load for ``kefu diagnose`` when the server has too few samples.

A few customers each hold a short conversation on ``/chat``, so the verdict also
sees how TTFT moves with the turn number. Traffic goes only to the URL given.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import httpx

QUESTIONS = [
    "Where is my parcel?",
    "How do I return an item?",
    "Can I change my delivery address?",
    "How long does a refund take?",
    "Do you ship abroad?",
    "I need an invoice for my order.",
]


@dataclass(frozen=True)
class ProbeResult:
    sent: int
    failed: int


async def probe(
    url: str,
    *,
    customers: int = 4,
    turns: int = 3,
    limit_s: float = 60.0,
    headers: dict[str, str] | None = None,
) -> ProbeResult:
    """``customers`` concurrent sessions of ``turns`` messages each; at most ``limit_s`` seconds."""
    sent = failed = 0

    async def customer(client: httpx.AsyncClient, index: int) -> None:
        nonlocal sent, failed
        session_id: str | None = None
        for turn in range(turns):
            body: dict[str, str] = {"message": QUESTIONS[(index + turn) % len(QUESTIONS)]}
            if session_id:
                body["session_id"] = session_id
            sent += 1
            try:
                session_id = await _one_turn(client, url, body) or session_id
            except (httpx.HTTPError, ValueError):
                failed += 1

    async with httpx.AsyncClient(timeout=limit_s, headers=headers) as client:
        try:
            async with asyncio.timeout(limit_s):
                await asyncio.gather(*(customer(client, i) for i in range(customers)))
        except TimeoutError:
            pass  # bounded by design: judge what was measured
    return ProbeResult(sent, failed)


async def _one_turn(client: httpx.AsyncClient, url: str, body: dict[str, str]) -> str | None:
    session_id = None
    async with client.stream("POST", url.rstrip("/") + "/chat", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            raise ValueError(f"HTTP {response.status_code}")
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "meta":
                session_id = json.loads(line[6:])["session_id"]
    return session_id
