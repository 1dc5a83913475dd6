"""The context builder, with FakeEngine as tokenizer (words + 3 tokens per message)."""

from __future__ import annotations

import pytest

from kefu.engine.base import ChatMessage, Tokenizer
from kefu.engine.fake import FakeEngine
from kefu.errors import ContextLengthExceeded, InvalidRequest
from kefu.memory.context import build_context, with_knowledge

PERSONA = "p1 p2"  # 2 words + 3 = 5 tokens
MESSAGE = "m"  # 1 word + 3 = 4 tokens
BASE = 9  # persona + message
TURN = 9  # "u<i>" (4) + "a<i> x" (5)


def history(turns: int) -> list[list[ChatMessage]]:
    return [
        [ChatMessage("user", f"u{i}"), ChatMessage("assistant", f"a{i} x")] for i in range(turns)
    ]


def flat(turns: list[list[ChatMessage]]) -> list[ChatMessage]:
    return [message for turn in turns for message in turn]


@pytest.fixture
def tokenizer() -> FakeEngine:
    return FakeEngine()


def test_fake_engine_is_a_tokenizer(tokenizer: FakeEngine) -> None:
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.count_chat_tokens(flat(history(1))) == TURN


def test_everything_fits(tokenizer: FakeEngine) -> None:
    built = build_context(
        persona=PERSONA, history=history(3), message=MESSAGE, tokenizer=tokenizer, budget=100
    )
    assert built.messages == [
        ChatMessage("system", PERSONA),
        *flat(history(3)),
        ChatMessage("user", MESSAGE),
    ]
    assert built.prompt_tokens == BASE + 3 * TURN
    assert built.turns_used == 3
    assert built.turns_dropped == 0


@pytest.mark.parametrize(
    ("budget", "used"),
    [
        (BASE + 3 * TURN, 3),  # exactly fits
        (BASE + 3 * TURN - 1, 2),
        (BASE + 2 * TURN, 2),
        (BASE + 2 * TURN - 1, 1),
        (BASE + TURN, 1),
        (BASE + TURN - 1, 0),
        (BASE, 0),
    ],
)
def test_oldest_whole_turns_dropped_first(tokenizer: FakeEngine, budget: int, used: int) -> None:
    built = build_context(
        persona=PERSONA, history=history(3), message=MESSAGE, tokenizer=tokenizer, budget=budget
    )
    assert built.turns_used == used
    assert built.turns_dropped == 3 - used
    # Persona first, message last, and the newest ``used`` turns in order between them.
    kept = flat(history(3)[3 - used :]) if used else []
    assert built.messages == [ChatMessage("system", PERSONA), *kept, ChatMessage("user", MESSAGE)]
    assert built.prompt_tokens == BASE + used * TURN
    assert built.prompt_tokens <= budget
    assert built.prompt_tokens == tokenizer.count_chat_tokens(built.messages)


def test_never_keeps_an_older_turn_after_dropping_a_newer_one(tokenizer: FakeEngine) -> None:
    small_old = [ChatMessage("user", "old"), ChatMessage("assistant", "old")]
    big_new = [ChatMessage("user", "new " * 50), ChatMessage("assistant", "new")]
    # The old turn alone would fit, but dropping must go oldest first, whole turns only.
    built = build_context(
        persona=PERSONA,
        history=[small_old, big_new],
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=BASE + 8,
    )
    assert built.turns_used == 0
    assert built.turns_dropped == 2
    assert built.messages == [ChatMessage("system", PERSONA), ChatMessage("user", MESSAGE)]


def test_no_history(tokenizer: FakeEngine) -> None:
    built = build_context(
        persona=PERSONA, history=[], message=MESSAGE, tokenizer=tokenizer, budget=BASE
    )
    assert built.turns_used == 0
    assert built.turns_dropped == 0
    assert built.prompt_tokens == BASE


def test_persona_and_message_too_long(tokenizer: FakeEngine) -> None:
    with pytest.raises(ContextLengthExceeded) as info:
        build_context(
            persona=PERSONA,
            history=history(2),
            message=MESSAGE,
            tokenizer=tokenizer,
            budget=BASE - 1,
        )
    error = info.value
    assert error.param == "message"
    assert error.code == "context_length_exceeded"
    assert isinstance(error, InvalidRequest)
    assert str(BASE) in error.message  # the tokens it needs
    assert str(BASE - 1) in error.message  # the budget


def test_long_message_is_never_cut(tokenizer: FakeEngine) -> None:
    message = "word " * 40
    built = build_context(
        persona=PERSONA, history=history(2), message=message, tokenizer=tokenizer, budget=50
    )
    # persona 5 + message 43 = 48 tokens: no 9-token turn fits next to them.
    assert built.messages == [ChatMessage("system", PERSONA), ChatMessage("user", message)]
    assert built.prompt_tokens == 48
    assert built.turns_used == 0
    assert built.turns_dropped == 2


def test_knowledge_goes_with_the_message_and_after_the_turns(tokenizer: FakeEngine) -> None:
    knowledge = [("q1", "a1"), ("q2", "a2")]
    built = build_context(
        persona=PERSONA,
        history=history(1),
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=100,
        knowledge=knowledge,
    )
    # The system prompt and the turns stay as the last prompt had them: the engine's KV of
    # the conversation is reused, and only the new message with its entries is read.
    assert built.messages[:-1] == [ChatMessage("system", PERSONA), *flat(history(1))]
    assert built.messages[-1:] == with_knowledge(MESSAGE, knowledge)
    assert "Q: q1\nA: a1" in built.messages[-1].content
    assert built.messages[-1].content.endswith(MESSAGE)
    assert built.knowledge == tuple(knowledge)
    # Too tight for everything: the turn goes first, then the last knowledge entry.
    full = built.prompt_tokens
    tighter = build_context(
        persona=PERSONA,
        history=history(1),
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=full - TURN,
        knowledge=knowledge,
    )
    assert tighter.turns_used == 0
    assert tighter.knowledge == tuple(knowledge)
    tightest = build_context(
        persona=PERSONA,
        history=history(1),
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=full - TURN - 1,
        knowledge=knowledge,
    )
    assert tightest.knowledge == (("q1", "a1"),)
    assert "q2" not in tightest.messages[-1].content


def test_an_entry_a_kept_turn_shows_is_not_sent_again(tokenizer: FakeEngine) -> None:
    shown = [
        *with_knowledge("u0", [("q1", "a1")]),
        ChatMessage("assistant", "a0"),
    ]
    built = build_context(
        persona=PERSONA,
        history=[shown],
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=100,
        knowledge=[("q1", "a1"), ("q2", "a2")],
    )
    assert built.knowledge == (("q2", "a2"),)
    assert built.messages[-1:] == with_knowledge(MESSAGE, [("q2", "a2")])
    assert built.messages[1] == shown[0]


def test_turns_lose_their_knowledge_before_any_turn_goes(tokenizer: FakeEngine) -> None:
    plain = history(2)
    sent = [[*with_knowledge(turn[0].content, [("q", "a " * 10)]), turn[1]] for turn in plain]
    roomy = build_context(
        persona=PERSONA,
        history=sent,
        plain_history=plain,
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=200,
    )
    assert roomy.messages[1:-1] == flat(sent)
    fits_plain = build_context(
        persona=PERSONA,
        history=sent,
        plain_history=plain,
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=BASE + 2 * TURN,
    )
    # Both turns stay, without their entries.
    assert fits_plain.messages[1:-1] == flat(plain)
    assert fits_plain.turns_dropped == 0
    one_turn = build_context(
        persona=PERSONA,
        history=sent,
        plain_history=plain,
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=BASE + TURN,
    )
    assert one_turn.messages[1:-1] == flat(plain[1:])


def test_the_knowledge_as_a_system_message_just_before_the_message(
    tokenizer: FakeEngine,
) -> None:
    knowledge = [("q1", "a1")]
    built = build_context(
        persona=PERSONA,
        history=history(1),
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=100,
        knowledge=knowledge,
        knowledge_as_system=True,
    )
    assert built.messages[:-2] == [ChatMessage("system", PERSONA), *flat(history(1))]
    system, user = built.messages[-2:]
    assert system.role == "system"
    assert "Q: q1\nA: a1" in system.content
    assert user == ChatMessage("user", MESSAGE)
    # A kept turn that showed the entry in its own system message: not sent again.
    again = build_context(
        persona=PERSONA,
        history=[[*built.messages[-2:], ChatMessage("assistant", "a")]],
        message=MESSAGE,
        tokenizer=tokenizer,
        budget=100,
        knowledge=knowledge,
        knowledge_as_system=True,
    )
    assert again.knowledge == ()
    assert again.messages[-1] == ChatMessage("user", MESSAGE)
