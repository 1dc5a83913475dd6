"""A WeChat message's answer: a /chat turn (``service.turn.run_turn``) on the user's own
session, or the channel's fixed texts for what is not a question.

The user is one kefu session (named from the account and the user, so every replica
finds it), with its history, memory and handoff; the user's rate limit is the token
bucket of --rate-limit. An answer WeChat must not lose is never refused outright: a
session busy with the user's previous message is waited for, an engine that is full is
asked again for a while; and when it cannot answer at all the user gets a clear text and
the conversation keeps the message.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass

from kefu.channels.wechat.inbound import Inbound
from kefu.errors import EngineError, KefuError, SessionBusy, Unavailable
from kefu.fastpath.smalltalk import shop_names
from kefu.limits.bucket import Limiter
from kefu.limits.rate import Rate
from kefu.observe.timeline import Timeline
from kefu.service.busy import TurnBusy
from kefu.service.runtime import Runtime
from kefu.service.suggestions import suggestions
from kefu.service.turn import TurnDone, TurnStarted, run_turn
from kefu.store.base import Turn

log = logging.getLogger("kefu.wechat")

# How long a message waits for its session (the user's previous message still being
# answered, or a dead replica's session lease running out: 30 s) and for a full engine.
PATIENCE_SECONDS = 90.0
RETRY_SECONDS = 0.25
OTHER_TEXT = "抱歉，我目前只能看懂文字消息。请用文字描述您的问题；需要人工客服请发送“转人工”。"
UNAVAILABLE_TEXT = (
    "抱歉，智能客服暂时无法回答，您的消息已记录。请稍后再试，或发送“转人工”联系人工客服。"
)
TOO_FAST_TEXT = "您发送得太快了，请稍等片刻再发。"


def session_name(prefix: str, account: str, user: str) -> str:
    """The user's session id: the same on every replica, and no openid in it (session ids
    appear in URLs and logs)."""
    digest = hashlib.sha256(f"{account}\0{user}".encode()).hexdigest()[:32]
    return f"{prefix}-{digest}"


class Answers:
    def __init__(
        self,
        runtime: Runtime,
        *,
        channel: str,
        account: str,
        limiter: Limiter,
        rate: Rate | None,
        patience: float = PATIENCE_SECONDS,
    ) -> None:
        self.runtime = runtime
        self.channel = channel  # "mp", "kf": the session-id prefix
        self.account = account  # the app id or corp id the sessions are named in
        self.limiter = limiter
        self.rate = rate
        self.patience = patience

    def session_of(self, user: str) -> str:
        return session_name(f"wx{self.channel}", self.account, user)

    async def answer(self, message: Inbound, resumed: bool = False) -> str:
        """``resumed``: another replica began this message and died; its turn may be stored."""
        if message.kind == "greet":
            return await self.greeting()
        if message.kind == "other":
            return OTHER_TEXT
        session_id = self.session_of(message.user)
        if resumed:
            stored = await self._stored_answer(session_id, message)
            if stored is not None:
                return stored
        decision = await self.limiter.acquire(f"wechat:{message.user}", self.rate, 0, None)
        if not decision.allowed:
            return TOO_FAST_TEXT
        return await self._turn(session_id, message)

    async def greeting(self) -> str:
        _, name = shop_names(self.runtime.settings.shop_name)  # Chinese, else English
        asked = await suggestions(self.runtime)
        questions = asked["zh"] or asked["en"]
        # A 公众号's new follower; a 微信客服 customer opening a conversation.
        welcome = "欢迎关注" if self.channel == "mp" else "欢迎来到"
        hello = f"您好，{welcome}{name}！" if name else "您好！"
        lines = [f"{hello}我是智能客服，有问题直接发消息给我。"]
        if questions:
            lines.append("大家常问：")
            lines.extend(f"{i}. {q}" for i, q in enumerate(questions, 1))
        lines.append("需要人工客服，请发送“转人工”。")
        return "\n".join(lines)

    async def _turn(self, session_id: str, message: Inbound) -> str:
        deadline = time.monotonic() + self.patience
        while True:
            timeline = Timeline()
            try:
                outcome = await self._run(session_id, message, timeline)
            except SessionBusy:
                outcome = _Failed("session_busy", stored=False)
                if time.monotonic() + RETRY_SECONDS < deadline:
                    await asyncio.sleep(RETRY_SECONDS)
                    continue
            finally:
                self._report(timeline, message)
            if isinstance(outcome, str):
                return outcome
            if isinstance(outcome, TurnBusy):
                left = deadline - time.monotonic()
                if left > 0:  # the engine may free up before it says: ask again then at most
                    await asyncio.sleep(min(outcome.retry_after, left))
                    continue
                outcome = _Failed(outcome.code, stored=False)
            log.warning("WeChat message %s not answered: %s", message.key, outcome.code)
            return await self._unanswered(session_id, message, outcome)

    async def _run(
        self, session_id: str, message: Inbound, timeline: Timeline
    ) -> str | TurnBusy | _Failed:
        started = False
        events = run_turn(
            self.runtime,
            message=message.text,
            session_id=session_id,
            user_id=message.user,
            tenant="default",
            timeline=timeline,
            open_missing=True,
        )
        try:
            async with aclosing(events) as turn:
                async for event in turn:
                    if isinstance(event, TurnBusy):
                        return event
                    if isinstance(event, TurnStarted):
                        started = True
                    elif isinstance(event, TurnDone):
                        return event.reply
        except (Unavailable, EngineError) as exc:
            # Once the turn began it stores itself, cut short and marked so.
            return _Failed(exc.code, stored=started)
        return _Failed("engine_error", stored=started)

    async def _unanswered(self, session_id: str, message: Inbound, failed: _Failed) -> str:
        """The clear text the user gets; the message is kept in the conversation."""
        if not failed.stored:
            meta = {"tier": "unavailable", "error": failed.code, "channel": self.channel}
            turn = Turn(user=message.text, assistant=UNAVAILABLE_TEXT, meta=meta)
            try:
                async with self.runtime.locks.hold(session_id):
                    await self.runtime.settled(session_id)
                    await self.runtime.store.append_turn(session_id, turn, message.user)
            except KefuError as exc:
                log.error("WeChat message %s could not be stored: %s", message.key, exc.message)
        return UNAVAILABLE_TEXT

    def _report(self, timeline: Timeline, message: Inbound) -> None:
        """The turn in /metrics, /stats and the access log, like a /chat turn."""
        if timeline.outcome.tier is None:
            return
        timeline.mark("sent")
        self.runtime.observer.report(
            request_id=message.key,
            method="POST",
            route=f"/wechat/{self.channel}",
            status=200,
            timeline=timeline,
        )

    async def _stored_answer(self, session_id: str, message: Inbound) -> str | None:
        """The answer a dead replica stored before it could deliver it: the session's last
        turn, if it answered this very message after it arrived."""
        await self.runtime.settled(session_id)
        recent = await self.runtime.store.recent_turns(session_id, 1)
        users = [m for m in recent if m.role == "user"]
        replies = [m for m in recent if m.role == "assistant" and m.meta.get("tier") != "agent"]
        if (
            users
            and replies
            and users[-1].content == message.text
            and users[-1].created_at >= message.created - 1
        ):
            return replies[-1].content
        return None


@dataclass(frozen=True, slots=True)
class _Failed:
    code: str  # the error's code: engine_not_ready, queue_full, session_busy, ...
    stored: bool  # the turn had begun and stored itself
