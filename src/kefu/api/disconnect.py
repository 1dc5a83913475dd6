"""Noticing a client that left, so its generation stops and its engine slot is freed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.types import Receive

T = TypeVar("T")


class ClientGone(Exception):
    """The client disconnected before its response was ready."""


async def wait_disconnect(receive: Receive) -> None:
    """Return once the client has gone; call only after the request body was read."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(receive: Receive, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; if the client leaves first, cancel it and raise ClientGone."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(wait_disconnect(receive))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    if task.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ClientGone
    return task.result()
