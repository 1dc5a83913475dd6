"""The desk on a ledger in process, with a recording outbox: a dead replica's message taken
over by the sweeper, a failed send tried again and a refused one given up, a ready answer
left to the request that waits for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from kefu.channels.wechat import desk as desk_module
from kefu.channels.wechat.answers import Answers
from kefu.channels.wechat.desk import Desk, DeskMetrics
from kefu.channels.wechat.inbound import Inbound
from kefu.channels.wechat.ledger import LocalLedger
from kefu.errors import ChannelError
from kefu.service.runtime import Runtime

pytestmark = pytest.mark.anyio


class Tasks:
    """What the desk uses of the runtime: background tasks."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        return task


class Echo:
    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[tuple[str, bool]] = []

    async def answer(self, message: Inbound, resumed: bool = False) -> str:
        self.calls.append((message.key, resumed))
        await asyncio.sleep(self.delay)
        return f"answer to {message.text}"


class Outbox:
    def __init__(self, failures: list[ChannelError] | None = None) -> None:
        self.failures = failures or []
        self.sent: list[tuple[str, str]] = []
        self.tries = 0

    async def send(self, user: str, text: str, *, key: str, part: int, code: str = "") -> None:
        self.tries += 1
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append((user, text))


def make_desk(ledger: LocalLedger, outbox: Outbox, answers: Echo, lease: float = 3.0) -> Desk:
    return Desk(
        channel="mp",
        runtime=cast(Runtime, Tasks()),
        ledger=ledger,
        answers=cast(Answers, answers),
        outbox=outbox,
        metrics=DeskMetrics(CollectorRegistry()),
        lease=lease,
    )


def message(n: int) -> Inbound:
    return Inbound(f"mp:{n}", f"o-{n}", "gh", "text", f"q{n}", int(time.time()))


async def settle(check: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_the_sweeper_takes_over_a_dead_replicas_message() -> None:
    ledger = LocalLedger()
    await ledger.arrive(message(1), "dead-replica", 0.05, 0.0)  # it died at once
    outbox, answers = Outbox(), Echo()
    desk = make_desk(ledger, outbox, answers)
    await desk.sweep()  # its lease still runs: nothing
    assert answers.calls == []
    await asyncio.sleep(0.1)
    await desk.sweep()
    await settle(lambda: outbox.sent)
    await desk.sweep()
    assert outbox.sent == [("o-1", "answer to q1")]
    assert answers.calls == [("mp:1", True)]


async def test_a_failed_send_is_tried_again_and_a_refused_one_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(desk_module, "RESEND_SECONDS", 0.05)
    ledger = LocalLedger()
    busy = ChannelError("WeChat: -1 system error", errcode=-1)
    outbox = Outbox([busy])
    desk = make_desk(ledger, outbox, Echo())
    assert await desk.receive(message(2), deadline=None) is None
    await settle(lambda: outbox.tries == 1)
    await asyncio.sleep(0.1)
    await desk.sweep()
    await settle(lambda: outbox.sent)
    assert outbox.sent == [("o-2", "answer to q2")]

    gone = ChannelError("WeChat: 45015 out of time", errcode=45015, permanent=True)
    refused = Outbox([gone])
    desk = make_desk(ledger, refused, Echo())
    await desk.receive(message(3), deadline=None)
    await settle(lambda: refused.tries == 1)
    await asyncio.sleep(0.1)
    await desk.sweep()
    await asyncio.sleep(0.05)
    assert refused.tries == 1
    entry = await ledger.get("mp:3")
    assert entry is not None
    assert entry.state == "failed"


async def test_an_answer_ready_in_time_goes_to_the_waiting_request_only() -> None:
    ledger = LocalLedger()
    outbox = Outbox()
    desk = make_desk(ledger, outbox, Echo(delay=0.2))
    replies = await asyncio.gather(
        desk.receive(message(4), deadline=time.perf_counter() + 1.0),
        desk.receive(message(4), deadline=time.perf_counter() + 1.0),  # a retry at once
    )
    assert list(replies) == ["answer to q4", "answer to q4"]
    await asyncio.sleep(0.3)
    assert outbox.sent == []
    late = make_desk(ledger, outbox, Echo(delay=0.3))
    assert await late.receive(message(5), deadline=time.perf_counter() + 0.1) is None
    await settle(lambda: outbox.sent)
    assert outbox.sent == [("o-5", "answer to q5")]
