"""The judge in a turn: after the reply, in the background, an engine able to read says
whether a knowledge-base entry's answer answers the customer's message
(``faq/judge.py`` chooses what to ask and words the question); the verdict is a label
for the next fit (``faq/labels.py``). Nothing waits for it: a verdict that fails, or
finds ``BACKLOG`` judgments already waiting, is dropped. Nothing is judged before the
judge has answered the knowledge base's known questions (``check``, started by the fast
path's first refresh round), and nothing after that if it was wrong too often there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from kefu.engine.base import Engine, Finished, GenerationRequest, SamplingParams, TokenDelta
from kefu.faq.judge import BACKLOG, Judging, Judgment, Reliability, prompt, verdict
from kefu.knowledge.entries import KbEntry, answer_key

log = logging.getLogger("kefu.fastpath")

# A verdict is one word; a judge that says more is cut.
JUDGE_TOKENS = 4
# A check that could not be made (its engine down, or a knowledge base of fewer than two
# answers) is tried again after this long.
CHECK_RETRY_S = 60.0

Spawn = Callable[[Coroutine[Any, Any, None]], object]
Record = Callable[[str, str, bool], Coroutine[Any, Any, None]]


class Judge:
    def __init__(
        self, engine: Engine, record: Record, *, start: bool = False, seed: int | None = None
    ) -> None:
        self.engine = engine
        self._start = start  # an engine of its own, started on first use
        self._record = record  # stores a verdict (message, answer, yes) and marks the fit stale
        self.judging = Judging(seed)
        self._waiting = 0
        self.asked = 0
        self.dropped = 0
        # How it did on known questions; None until it has answered them all.
        self.reliability: Reliability | None = None
        self._check_at = 0.0  # when a check may (next) start

    def may_check(self) -> bool:
        """Whether to start the check now (not under way, not done, not just failed)."""
        if self.reliability is not None or time.monotonic() < self._check_at:
            return False
        self._check_at = float("inf")  # under way
        return True

    async def check(self, known: Sequence[tuple[Judgment, bool]]) -> Reliability | None:
        """Ask the known questions one at a time; None if there were none yet (fewer than
        two answers) or the engine failed: tried again after ``CHECK_RETRY_S``."""
        if not known:
            self._check_at = time.monotonic() + CHECK_RETRY_S
            return None
        tally = Reliability(0, 0, len(known))
        try:
            for judgment, truth in known:
                tally = tally.counted(await self.ask(judgment) is truth)
                if tally.hopeless:
                    break
        except Exception as exc:
            log.warning("the judge did not answer its check: %s", exc)
            self._check_at = time.monotonic() + CHECK_RETRY_S
            return None
        self.reliability = tally
        if tally.useless:
            log.warning(
                "the judge was wrong on %d of %d questions whose answer is known: its "
                "verdicts are not used",
                tally.wrong,
                tally.asked,
            )
        return tally

    @property
    def judging_traffic(self) -> bool:
        return self.reliability is not None and not self.reliability.useless

    def after_reply(
        self, message: str, served: KbEntry | None, declined: list[KbEntry], spawn: Spawn
    ) -> None:
        """Judge what the turn leaves open: a served answer, sometimes; the candidates of
        a declined message that the LLM read among its passages, always."""
        if not self.judging_traffic:
            return
        asked = []
        if served is not None:
            if self.judging.check_served(answer_key(served.answer)):
                asked.append(served)
        else:
            asked += declined
        for entry in asked:
            if self._waiting >= BACKLOG:
                self.dropped += 1
                continue
            self._waiting += 1
            judgment = Judgment(message, entry.question, entry.answer)
            spawn(self._judge(judgment, served is not None))

    async def _judge(self, judgment: Judgment, served: bool) -> None:
        try:
            said = await self.ask(judgment)
            if said is not None:
                key = answer_key(judgment.answer)
                if served:
                    self.judging.counted(key)
                await self._record(judgment.message, key, said)
        except Exception as exc:  # a judge that fails only loses a label
            log.info("the judge did not answer: %s", exc)
        finally:
            self._waiting -= 1

    async def ask(self, judgment: Judgment) -> bool | None:
        self.asked += 1
        if self._start:
            self._start = False
            await self.engine.start()
        request = GenerationRequest(
            prompt(judgment),
            SamplingParams(max_tokens=JUDGE_TOKENS, temperature=0.0),
            request_id="judge",
            background=True,
            keep_prefix=False,
        )
        text = []
        async for event in self.engine.generate(request):
            if isinstance(event, TokenDelta):
                text.append(event.text)
            elif isinstance(event, Finished):
                break
        return verdict("".join(text))

    def status(self) -> dict[str, object]:
        checked = None if self.reliability is None else self.reliability.summary()
        return {
            "asked": self.asked,
            "waiting": self._waiting,
            "dropped": self.dropped,
            "checked": checked,
        }
