"""The tokenizer's memo is bounded by tokens, not by prompts (issue 23's soak: 256 long
prompts kept growing), and still spares the second tokenisation of a prompt."""

from __future__ import annotations

from kefu.engine.llamacpp.model import TokenMemo


class CountingTokenizer:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> tuple[int, ...]:
        self.calls.append(text)
        return tuple(range(len(text)))  # one token per character


def test_a_repeated_text_is_tokenised_once() -> None:
    tokenize = CountingTokenizer()
    memo = TokenMemo(tokenize, budget=100)
    assert memo("hello") == (0, 1, 2, 3, 4)
    assert memo("hello") == (0, 1, 2, 3, 4)
    assert tokenize.calls == ["hello"]


def test_the_memo_never_holds_more_tokens_than_its_budget() -> None:
    tokenize = CountingTokenizer()
    memo = TokenMemo(tokenize, budget=10)
    for text in ("aaaa", "bbbb", "cccc"):  # 12 tokens: the oldest goes
        memo(text)
    assert memo.tokens == 8
    assert len(memo) == 2
    memo("bbbb")  # still held, and now the most recent
    memo("dddd")  # cccc is now the oldest, so it goes
    assert memo.tokens == 8
    memo("bbbb")
    memo("cccc")
    assert tokenize.calls == ["aaaa", "bbbb", "cccc", "dddd", "cccc"]


def test_a_text_longer_than_the_budget_is_not_kept() -> None:
    tokenize = CountingTokenizer()
    memo = TokenMemo(tokenize, budget=3)
    memo("abc")
    assert memo("abcdef") == tuple(range(6))
    assert memo.tokens == 3  # the short one stays
    memo("abcdef")
    assert tokenize.calls.count("abcdef") == 2
