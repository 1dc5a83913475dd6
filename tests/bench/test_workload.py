"""Simulated customers: shares, Zipf repeats, sessions of k turns, think time, pools."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from kefu.bench.workload import (
    Pool,
    Think,
    Turns,
    Workload,
    WorkloadError,
    WorkloadSpec,
    builtin_pool,
    load_pool,
    parse_think,
    parse_turns,
)

EN = builtin_pool("en")


def messages(workload: Workload, sessions: int) -> list[tuple[int, int, str, str, int | None]]:
    out: list[tuple[int, int, str, str, int | None]] = []
    for index in range(sessions):
        session = workload.session(index)
        for turn, m in enumerate(session.messages, start=1):
            out.append((index, turn, m.kind, m.text, m.rank))
    return out


def test_shares_within_tolerance_for_a_fixed_seed() -> None:
    spec = WorkloadSpec(pool=EN, turns=Turns(1, 4), repeat_share=0.5, order_share=0.1, seed=7)
    drawn = messages(Workload(spec), 1500)
    kinds = Counter(kind for _, _, kind, _, _ in drawn)
    n = len(drawn)
    assert n > 3000
    assert kinds["faq"] / n == pytest.approx(0.5, abs=0.03)
    assert kinds["order"] / n == pytest.approx(0.1, abs=0.02)
    assert kinds["unique"] / n == pytest.approx(0.4, abs=0.03)


def test_faqs_follow_zipf() -> None:
    spec = WorkloadSpec(pool=EN, turns=Turns(1, 1), repeat_share=1.0, order_share=0.0, seed=3)
    ranks = Counter(rank for *_, rank in messages(Workload(spec), 6000))
    harmonic = sum(1 / r for r in range(1, len(EN.faqs) + 1))
    assert ranks[1] / 6000 == pytest.approx(1 / harmonic, abs=0.02)  # ~25 % for 30 FAQs
    assert ranks[1] / ranks[2] == pytest.approx(2.0, rel=0.2)
    assert ranks[1] / ranks[10] == pytest.approx(10.0, rel=0.35)
    assert ranks[1] > ranks[5] > ranks[30]
    # The most asked question is the pool's first.
    text = next(t for *_, t, r in messages(Workload(spec), 50) if r == 1)
    assert text == EN.faqs[0]


def test_zipf_zero_is_uniform() -> None:
    spec = WorkloadSpec(pool=EN, turns=Turns(1, 1), repeat_share=1.0, order_share=0.0, zipf_s=0)
    ranks = Counter(rank for *_, rank in messages(Workload(spec), 3000))
    assert max(ranks.values()) / min(ranks.values()) < 2


def test_same_seed_same_customers_other_seed_others() -> None:
    a = Workload(WorkloadSpec(pool=EN, seed=1))
    b = Workload(WorkloadSpec(pool=EN, seed=1))
    c = Workload(WorkloadSpec(pool=EN, seed=2))
    assert [a.session(i) for i in range(50)] == [b.session(i) for i in range(50)]
    assert [a.session(i) for i in range(50)] != [c.session(i) for i in range(50)]
    # A session depends on its index only, not on which sessions were made before.
    assert a.session(42) == Workload(WorkloadSpec(pool=EN, seed=1)).session(42)


def test_unique_messages_are_unique() -> None:
    spec = WorkloadSpec(pool=EN, repeat_share=0.0, order_share=0.0, turns=Turns(3, 5))
    texts = [t for *_, t, _ in messages(Workload(spec), 400)]
    assert len(texts) == len(set(texts))
    level_two = Workload(spec).session(1_000_000)  # the next sweep level's sessions
    assert not {m.text for m in level_two.messages} & set(texts)


def test_sessions_of_k_turns_with_think_time() -> None:
    fixed = Workload(WorkloadSpec(pool=EN, turns=Turns(3, 3), think=parse_think("0")))
    for i in range(20):
        session = fixed.session(i)
        assert len(session.messages) == 3
        assert session.think == (0.0, 0.0)
    ranged = Workload(WorkloadSpec(pool=EN, turns=Turns(1, 4), think=parse_think("1-3")))
    lengths = Counter(len(ranged.session(i).messages) for i in range(400))
    assert set(lengths) == {1, 2, 3, 4}
    for i in range(100):
        session = ranged.session(i)
        assert len(session.think) == len(session.messages) - 1
        assert all(1 <= t <= 3 for t in session.think)


def test_exponential_think_time() -> None:
    workload = Workload(WorkloadSpec(pool=EN, turns=Turns(10, 10), think=parse_think("2")))
    pauses = [t for i in range(300) for t in workload.session(i).think]
    assert sum(pauses) / len(pauses) == pytest.approx(2.0, rel=0.1)
    assert max(pauses) <= 20  # capped at 10 means


def test_order_status_messages_carry_an_order_number() -> None:
    spec = WorkloadSpec(pool=EN, repeat_share=0.0, order_share=1.0)
    for *_, kind, text, _ in messages(Workload(spec), 30):
        assert kind == "order"
        assert re.search(r"KF\d{8}", text), text


def test_chinese_pool() -> None:
    spec = WorkloadSpec(pool=builtin_pool("zh"), order_share=0.2, seed=5)
    texts = [t for *_, t, _ in messages(Workload(spec), 100)]
    assert all(re.search(r"[\u4e00-\u9fff]", t) for t in texts)


@pytest.mark.parametrize(("text", "expected"), [("3", Turns(3, 3)), ("1-4", Turns(1, 4))])
def test_parse_turns(text: str, expected: Turns) -> None:
    assert parse_turns(text) == expected


@pytest.mark.parametrize("text", ["0", "4-2", "x", "1-", "1-51"])
def test_bad_turns(text: str) -> None:
    with pytest.raises(WorkloadError, match="--turns"):
        parse_turns(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", Think(0, 0, True)), ("1.5", Think(0, 1.5, True)), ("1-3", Think(1, 3, False))],
)
def test_parse_think(text: str, expected: Think) -> None:
    assert parse_think(text) == expected


@pytest.mark.parametrize("text", ["-1", "a", "3-1", "99999"])
def test_bad_think(text: str) -> None:
    with pytest.raises(WorkloadError, match="--think"):
        parse_think(text)


def test_shares_must_fit() -> None:
    with pytest.raises(WorkloadError, match="at most 1"):
        Workload(WorkloadSpec(pool=EN, repeat_share=0.8, order_share=0.3))
    with pytest.raises(WorkloadError, match="--repeat-share"):
        Workload(WorkloadSpec(pool=EN, repeat_share=1.5))
    with pytest.raises(WorkloadError, match="--zipf"):
        Workload(WorkloadSpec(pool=EN, zipf_s=-1))


def test_a_pool_must_hold_the_kinds_the_shares_ask_for() -> None:
    faqs_only = Pool("mine", ("Hi?",), (), ())
    Workload(WorkloadSpec(pool=faqs_only, repeat_share=1.0, order_share=0.0))
    with pytest.raises(WorkloadError, match="no unique messages"):
        Workload(WorkloadSpec(pool=faqs_only, repeat_share=0.5, order_share=0.0))
    with pytest.raises(WorkloadError, match="no order messages"):
        Workload(WorkloadSpec(pool=faqs_only, repeat_share=0.9, order_share=0.1))


def write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_pool(tmp_path: Path) -> None:
    path = write(
        tmp_path / "pool.jsonl",
        json.dumps({"text": "Most asked?"}),
        "",
        json.dumps({"text": "Second?", "kind": "faq"}),
        json.dumps({"text": "My own case {n}, please", "kind": "unique"}),
        json.dumps({"text": "A case without a number", "kind": "unique"}),
        json.dumps({"text": "Where is {order}?", "kind": "order"}),
        json.dumps({"text": "订单状态", "kind": "order"}),
    )
    pool = load_pool(path)
    assert pool.name == "pool.jsonl"
    assert pool.faqs == ("Most asked?", "Second?")
    assert pool.unique == ("My own case {n}, please", "A case without a number #{n}")
    assert pool.orders == ("Where is {order}?", "订单状态 (order {order})")
    spec = WorkloadSpec(pool=pool, repeat_share=0.0, order_share=0.0, turns=Turns(2, 2))
    texts = [t for *_, t, _ in messages(Workload(spec), 50)]
    assert len(set(texts)) == 100


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"text": "ok"', "line 2: not valid JSON"),
        ('["text"]', "line 2: expected an object"),
        ('{"kind": "faq"}', "line 2: 'text' must be a non-empty string"),
        ('{"text": "  "}', "line 2: 'text' must be a non-empty string"),
        ('{"text": 3}', "line 2: 'text' must be a non-empty string"),
        ('{"text": "hi", "kind": "greeting"}', "line 2: unknown kind 'greeting'"),
    ],
)
def test_malformed_jsonl_names_the_line(tmp_path: Path, line: str, says: str) -> None:
    path = write(tmp_path / "bad.jsonl", '{"text": "fine"}', line)
    with pytest.raises(WorkloadError) as info:
        load_pool(path)
    assert str(info.value) == f"{path} {says}" or str(info.value).startswith(f"{path} {says}")


def test_missing_or_empty_pool(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="cannot read pool"):
        load_pool(tmp_path / "nope.jsonl")
    with pytest.raises(WorkloadError, match="has no messages"):
        load_pool(write(tmp_path / "empty.jsonl", "", ""))
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(WorkloadError, match="not UTF-8"):
        load_pool(tmp_path / "binary.jsonl")
