"""A /chat prompt fitted to the SLO: admission says how long a prompt it expects in time
(``Admission.readable``, on a clock the test sets), and the prompt is built again that much
shorter where that fits (``fit_prompt``, with FakeEngine as tokenizer: words + 3 tokens a
message)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import pytest

from kefu.engine.base import ChatMessage
from kefu.engine.fake import FakeEngine
from kefu.memory.context import BuiltContext, build_context
from kefu.service.prompt_fit import fit_prompt
from tests.http.helpers import calibrate
from tests.unit.test_admission_predicted import Clock, Held, measured_line, predicted

PERSONA = "p1 p2"  # 5 tokens
MESSAGE = "m"  # 4 tokens
TURN = 9  # "u<i>" (4) + "a<i> x" (5)


def history(turns: int) -> list[list[ChatMessage]]:
    return [
        [ChatMessage("user", f"u{i}"), ChatMessage("assistant", f"a{i} x")] for i in range(turns)
    ]


def builder(turns: int, knowledge: Sequence[tuple[str, str]] = ()) -> partial[BuiltContext]:
    return partial(
        build_context,
        persona=PERSONA,
        history=history(turns),
        message=MESSAGE,
        tokenizer=FakeEngine(),
        budget=1000,
        knowledge=knowledge,
        knowledge_as_system=True,
    )


# --- Admission.readable ------------------------------------------------------------------


def test_nothing_measured_says_nothing() -> None:
    assert predicted(Clock()).readable() is None


def test_readable_is_the_longest_prompt_predicted_within_the_slo() -> None:
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)  # 0.195 s + 5 ms a token
    calibrate(admission)  # outcomes that say the estimates hold
    readable = admission.readable()
    assert readable is not None
    assert 350 < readable < 370  # (2 - 0.195) / 0.005
    assert admission.judge(tokens=readable).predicted <= admission.ttft_slo
    assert admission.judge(tokens=readable + 2).predicted > admission.ttft_slo


def test_uncalibrated_it_leaves_room_for_half_the_slo() -> None:
    """No outcome has corrected the estimate yet: the warm-up's speed may be twice what a
    loaded box reads at."""
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    readable = admission.readable()
    assert readable is not None
    assert 155 < readable < 165  # (1 - 0.195) / 0.005
    calibrate(admission, ratio=1.5)  # a correction of 1.5: (2 / 1.5 - 0.195) / 0.005
    readable = admission.readable()
    assert readable is not None
    assert 222 < readable < 232


def test_time_spent_and_prompts_ahead_leave_room_for_less() -> None:
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    calibrate(admission)
    fresh = admission.readable()
    late = admission.readable(received=clock.now - 0.5)
    assert fresh is not None
    assert late is not None
    assert fresh - late in (99, 100, 101)  # half a second is 100 tokens


@pytest.mark.anyio
async def test_prompts_ahead_shorten_it_and_a_wait_past_the_slo_leaves_nothing() -> None:
    clock = Clock()
    admission = predicted(clock)
    measured_line(admission)
    calibrate(admission)
    held = Held(admission)
    await held.hold(read=False, tokens=200)  # 1.195 s ahead
    behind = admission.readable()
    assert behind is not None
    assert admission.judge(tokens=behind).predicted <= admission.ttft_slo
    assert 100 < behind < 140  # (2 - 1.195 - 0.195) / 0.005 = 122
    # 1.195 s ahead and 0.7 s spent: past the SLO before its own is begun.
    assert admission.readable(received=clock.now - 0.7) is None
    await held.release()


# --- fit_prompt ----------------------------------------------------------------------------


def test_a_prompt_that_fits_stays_whole() -> None:
    fitted = fit_prompt(builder(4), FakeEngine(), readable=1000)
    assert fitted.context.turns_used == 4
    assert fitted.saved == fitted.turns == 0
    assert fit_prompt(builder(4), FakeEngine(), readable=None).context.turns_used == 4


def test_the_oldest_turns_go_to_what_can_be_read() -> None:
    whole = fit_prompt(builder(4), FakeEngine(), readable=None)
    fitted = fit_prompt(builder(4), FakeEngine(), readable=whole.unread - 2 * TURN)
    assert fitted.context.turns_used == 2
    assert [m.content for m in fitted.context.messages[1:3]] == ["u2", "a2 x"]
    assert (fitted.saved, fitted.turns, fitted.passages) == (2 * TURN, 2, 0)
    assert fitted.unread == whole.unread - 2 * TURN
    assert fitted.meta() == {"tokens": 2 * TURN, "turns": 2, "passages": 0}


def test_then_the_least_relevant_passages() -> None:
    knowledge = [("q1", "best"), ("q2", "second")]
    whole = fit_prompt(builder(1, knowledge), FakeEngine(), readable=None)
    fitted = fit_prompt(builder(1, knowledge), FakeEngine(), readable=whole.unread - TURN - 3)
    assert fitted.turns == 1
    assert fitted.passages == 1
    assert "best" in fitted.context.messages[1].content
    assert "second" not in fitted.context.messages[1].content


def test_a_fit_that_cannot_reach_the_slo_keeps_the_prompt_whole() -> None:
    """Persona and message alone are past it: losing the turns would buy nothing."""
    fitted = fit_prompt(builder(4), FakeEngine(), readable=5)
    assert fitted.context.turns_used == 4
    assert fitted.saved == 0


def test_the_best_passage_and_the_memory_stay() -> None:
    """A fit that would need the last passage, or the memory, is no fit: the model would
    answer from nothing, or forget the order number."""
    knowledge = [("q1", "best")]
    whole = fit_prompt(builder(1, knowledge), FakeEngine(), readable=None)
    without_passage = fit_prompt(builder(1, knowledge), FakeEngine(), readable=whole.unread - 12)
    assert without_passage.saved == 0
    assert "best" in without_passage.context.messages[3].content
    remembering = partial(builder(1), memory="order 123")
    whole = fit_prompt(remembering, FakeEngine(), readable=None)
    without_memory = fit_prompt(remembering, FakeEngine(), readable=whole.unread - TURN - 1)
    assert without_memory.saved == 0
    assert "order 123" in without_memory.context.messages[0].content
    with_memory = fit_prompt(remembering, FakeEngine(), readable=whole.unread - TURN)
    assert with_memory.turns == 1
    assert "order 123" in with_memory.context.messages[0].content


class CachedTurns(FakeEngine):
    """An engine holding the KV of the persona and the first turns: a prompt that starts so
    reads only the rest."""

    def reusable_prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        kept = [ChatMessage("system", PERSONA), *(m for turn in history(3) for m in turn)]
        shared = 0
        for ours, theirs in zip(messages, kept, strict=False):
            if ours != theirs:
                break
            shared += 1
        return self.count_chat_tokens(kept[:shared])


def test_turns_the_engine_keeps_are_not_dropped_to_be_read_again() -> None:
    engine = CachedTurns()
    build = partial(builder(4), tokenizer=engine)
    whole = fit_prompt(build, engine, readable=None)
    assert whole.unread == TURN + 4  # the fourth turn and the message
    fitted = fit_prompt(build, engine, readable=whole.unread - 1)
    assert fitted.context.turns_used == 4
    assert fitted.saved == 0
