"""Long conversations (issue 21): facts read by code, the memory block, where the context
builder puts it, and which turns a prompt keeps."""

from __future__ import annotations

from kefu import demo
from kefu.engine.base import ChatMessage
from kefu.engine.fake import FakeEngine
from kefu.memory.context import build_context, with_knowledge
from kefu.memory.extractive import estimate_tokens, extractive_summary
from kefu.memory.facts import MAX_VALUES, merge_facts
from kefu.memory.keeper import whole_turns
from kefu.memory.render import memory_block, summary_prompt
from kefu.service.turn import prompt_history
from kefu.store.base import SessionMemory, StoredMessage


def facts(*user: str, known: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    return merge_facts(
        known or {},
        [ChatMessage("user", text) for text in user] + [ChatMessage("assistant", "LH-999999")],
        order_pattern=demo.ORDER_PATTERN,
        order_example=demo.ORDER_EXAMPLE,
    )


def test_every_order_number_size_and_address_the_customer_gives_is_kept() -> None:
    found = facts(
        "Order lh100234 and LH 200345 came in size XL, mail me at ann@example.com",
        "我的订单LH-300456尺码是38",
    )
    assert found["order_numbers"] == ["LH-100234", "LH-200345", "LH-300456"]
    assert found["sizes"] == ["XL", "38"]
    assert found["emails"] == ["ann@example.com"]
    assert found["language"] == ["zh"]  # the latest message's
    assert found["opening"] == [
        "Order lh100234 and LH 200345 came in size XL, mail me at ann@example.com"
    ]


def test_the_assistant_states_no_facts_and_merging_keeps_the_latest() -> None:
    known = {"order_numbers": [f"LH-10000{i}" for i in range(MAX_VALUES)]}
    found = facts("It is LH-100001 after all", known=known)
    assert found["order_numbers"][-1] == "LH-100001"
    assert len(found["order_numbers"]) == MAX_VALUES
    assert "LH-999999" not in found["order_numbers"]
    assert facts("hello") == {"opening": ["hello"], "language": ["en"]}


def test_the_memory_block_lists_facts_then_the_summary() -> None:
    assert memory_block(None) == ""
    assert memory_block(SessionMemory()) == ""
    block = memory_block(
        SessionMemory("leaking kettle", {"order_numbers": ["LH-100234"], "language": ["en"]}, 3)
    )
    assert block.splitlines()[1:] == ["- Order numbers: LH-100234", "- Summary: leaking kettle"]
    prompt = summary_prompt(
        "older", [[ChatMessage("user", "hi"), ChatMessage("assistant", "yo")]], 50
    )
    assert prompt[1].content == "Summary so far: older\nCustomer: hi\nAgent: yo"


def test_the_memory_follows_the_persona_and_goes_only_when_nothing_else_fits() -> None:
    tokenizer = FakeEngine()
    turns = [[ChatMessage("user", "u1"), ChatMessage("assistant", "a1")]]
    built = build_context(
        persona="p",
        history=turns,
        message="m",
        tokenizer=tokenizer,
        budget=100,
        knowledge=[("q", "a")],
        memory="facts here",
    )
    assert built.messages[0].content == "p\n\nfacts here"
    assert "Q: q\nA: a" in built.messages[-1].content
    tight = build_context(
        persona="p", history=turns, message="m", tokenizer=tokenizer, budget=8, memory="x " * 50
    )
    assert [m.content for m in tight.messages] == ["p", "m"]


def stored(turns: int) -> list[StoredMessage]:
    return [
        StoredMessage(role, f"{role}{n}", 0.0, turn=n)
        for n in range(1, turns + 1)
        for role in ("user", "assistant")
    ]


def test_summary_mode_keeps_the_turns_since_the_memory_window_mode_the_last_ones() -> None:
    def users(history: tuple[list[list[ChatMessage]], list[list[ChatMessage]]]) -> list[str]:
        sent, plain = history
        assert sent == plain  # no turn here was sent with knowledge
        return [turn[0].content for turn in sent]

    assert users(prompt_history(stored(9), 2, "window", 0, 1)) == ["user8", "user9"]
    # Dropped in blocks of 3: 2 to 4 turns, the same first turn for 3 turns in a row.
    assert users(prompt_history(stored(9), 2, "window", 0, 3)) == ["user7", "user8", "user9"]
    assert users(prompt_history(stored(10), 2, "window", 0, 3)) == [
        "user7",
        "user8",
        "user9",
        "user10",
    ]
    assert users(prompt_history(stored(11), 2, "window", 0, 3)) == ["user10", "user11"]
    assert users(prompt_history(stored(9), 2, "summary", 5, 3)) == [
        "user6",
        "user7",
        "user8",
        "user9",
    ]
    # A summary that lags: at most window + 2 x every turns.
    assert len(prompt_history(stored(20), 2, "summary", 0, 3)[0]) == 8


def sent_with(turns: int, knowledge: list[list[str]]) -> list[StoredMessage]:
    """``turns`` turns, each reply's message sent with ``knowledge``."""
    return [
        StoredMessage("user", f"user{n}", 0.0, turn=n)
        if role == "user"
        else StoredMessage("assistant", f"reply{n}", 0.0, {"knowledge": knowledge}, turn=n)
        for n in range(1, turns + 1)
        for role in ("user", "assistant")
    ]


def test_turns_are_as_the_model_read_them_but_those_a_fold_kept() -> None:
    entry = [["Do you ship abroad?", "Yes, to 30 countries."]]
    knowledge = [("Do you ship abroad?", "Yes, to 30 countries.")]

    def reply(n: int) -> ChatMessage:
        return ChatMessage("assistant", f"reply{n}")

    # Nothing folded yet: every turn as it was sent, so the prompt only grows.
    sent, plain = prompt_history(sent_with(4, entry), 2, "summary", 0, 3)
    assert sent == [[*with_knowledge(f"user{n}", knowledge), reply(n)] for n in range(1, 5)]
    assert plain == [[ChatMessage("user", f"user{n}"), reply(n)] for n in range(1, 5)]
    # As a system message just before the message, where the engine's template takes one.
    sent, _ = prompt_history(sent_with(1, entry), 2, "summary", 0, 3, knowledge_as_system=True)
    assert [m.role for m in sent[0]] == ["system", "user", "assistant"]
    assert sent[0][:2] == with_knowledge("user1", knowledge, as_system=True)
    # Folded up to turn 2 with a window of 2: turns 3 and 4 were kept across the fold and
    # go without their knowledge (as the fold's prefill read them); turn 5 on keep it.
    sent, _ = prompt_history(sent_with(5, entry), 2, "summary", 2, 3)
    assert sent == [
        [ChatMessage("user", "user3"), reply(3)],
        [ChatMessage("user", "user4"), reply(4)],
        [*with_knowledge("user5", knowledge), reply(5)],
    ]
    # A turn stored before turns kept their knowledge reads as it always did.
    assert whole_turns(stored(2), sent_after=0) == whole_turns(stored(2))


def quotes(*user: str, max_tokens: int = 150, skip: tuple[str, ...] = ()) -> str:
    messages = [
        m
        for text in user
        for m in (ChatMessage("user", text), ChatMessage("assistant", "Noted, LH-999999."))
    ]
    return extractive_summary(
        messages,
        max_tokens=max_tokens,
        order_pattern=demo.ORDER_PATTERN,
        order_example=demo.ORDER_EXAMPLE,
        skip=skip,
    )


def test_the_code_summary_quotes_the_customer_facts_first_within_its_cap() -> None:
    said = (
        "Hi there. My coffee grinder stopped turning after a week.",
        "Can you tell me how returns work?",
        "It was order LH-204518, paid by card. Thanks!",
        "我买的吹风机用了两天就不热了。",
    )
    summary = quotes(*said)
    assert summary == (
        'The customer said earlier: "My coffee grinder stopped turning after a week." '
        '"Can you tell me how returns work?" "It was order LH-204518, paid by card." '
        '"我买的吹风机用了两天就不热了。"'
    )  # greetings and thanks dropped, the assistant never quoted, the order kept
    # A tight cap keeps the sentence with the order number, then the newest statement.
    tight = quotes(*said, max_tokens=40)
    assert "LH-204518" in tight
    assert "吹风机" in tight
    assert "returns" not in tight
    assert "grinder" not in tight
    assert estimate_tokens(tight) <= 40
    # What the memory already holds verbatim (the opening) is not quoted again.
    assert "grinder" not in quotes(*said, skip=(said[0],))
    assert quotes("Hello!", "ok thanks") == ""
