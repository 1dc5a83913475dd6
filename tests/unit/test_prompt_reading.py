"""PromptReading: how long the engine takes to read a prompt, as a line in the tokens left
to read, and what ``unread_tokens`` counts for an engine that keeps prompts and one that
does not. Times are given, nothing is slept or timed."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kefu.engine.base import ChatMessage, PrefixReuse, unread_tokens
from kefu.engine.fake import FakeEngine
from kefu.limits.rates import PromptReading


def test_no_sample_no_line() -> None:
    reading = PromptReading()
    assert reading.samples == 0
    assert reading.line() == (0.0, 0.0)


def test_one_length_alone_is_read_as_proportional() -> None:
    reading = PromptReading()
    reading.add(300, 0.6)
    assert reading.line() == pytest.approx((0.0, 0.002))
    assert reading.seconds(150) == pytest.approx(0.3)
    assert reading.typical == 0  # a sample of the speed says nothing of the prompts to come


def test_the_typical_prompt_is_the_counted_prompts_mean() -> None:
    reading = PromptReading()
    reading.observe(10)
    reading.observe(30)
    assert reading.typical == 14  # the newest weighs 0.2
    assert reading.samples == 0


def test_two_lengths_give_a_step_and_a_speed() -> None:
    """A cached prompt still waits one engine step; a long one pays for each token."""
    reading = PromptReading()
    reading.add(1, 0.2)
    reading.add(301, 1.7)
    fixed, per_token = reading.line()
    assert fixed == pytest.approx(0.195)
    assert per_token == pytest.approx(0.005)
    assert reading.seconds(101) == pytest.approx(0.7)


def test_longer_prompts_reading_faster_is_noise_and_the_mean_stands() -> None:
    reading = PromptReading()
    reading.add(100, 1.0)
    reading.add(300, 0.5)
    fixed, per_token = reading.line()
    assert per_token == 0.0
    assert fixed == pytest.approx((0.9 * 1.0 + 0.5) / 1.9)  # the older sample weighs 0.9


def test_a_line_below_zero_for_short_prompts_is_read_as_proportional() -> None:
    reading = PromptReading()
    reading.add(100, 0.1)
    reading.add(200, 1.0)  # the line through both would give a 10-token prompt -0.7 s
    fixed, per_token = reading.line()
    assert fixed == 0.0
    assert per_token == pytest.approx((0.9 * 100 * 0.1 + 200 * 1.0) / (0.9 * 100**2 + 200**2))


def test_the_line_follows_an_engine_that_slows_down() -> None:
    reading = PromptReading()
    for _ in range(20):
        reading.add(100, 0.5)
        reading.add(300, 1.5)
    for _ in range(20):  # another load on the cores: half the speed
        reading.add(100, 1.0)
        reading.add(300, 3.0)
    assert reading.seconds(200) == pytest.approx(2.0, rel=0.05)


class KeepsPrompts(FakeEngine):
    """A fake engine whose cache holds the first ``kept`` tokens of every prompt."""

    def __init__(self, kept: int) -> None:
        super().__init__()
        self.kept = kept

    def reusable_prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return min(self.kept, self.count_chat_tokens(messages) - 1)


def test_unread_tokens_leaves_out_what_the_engine_keeps() -> None:
    messages = [ChatMessage("system", "you help customers"), ChatMessage("user", "hi there")]
    plain = FakeEngine()
    total = plain.count_chat_tokens(messages)
    assert not isinstance(plain, PrefixReuse)
    assert unread_tokens(plain, messages, total) == total  # a remote engine: all of it
    keeps = KeepsPrompts(kept=3)
    assert isinstance(keeps, PrefixReuse)
    assert unread_tokens(keeps, messages, total) == total - 3
    assert unread_tokens(KeepsPrompts(kept=10**6), messages, total) == 1  # the last is read
