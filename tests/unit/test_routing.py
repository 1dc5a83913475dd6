"""Choosing an engine: rendezvous hashing, the load override, least load, round robin."""

from __future__ import annotations

from kefu.engine.routing import Candidate, choose


def pick(candidates: list[Candidate], key: str, *, routing: str = "affinity", turn: int = 0) -> str:
    return choose(
        candidates,
        routing=routing,  # type: ignore[arg-type]
        key=key,
        imbalance=4,
        turn=turn,
    ).name


def idle(*names: str) -> list[Candidate]:
    return [Candidate(name, 0) for name in names]


def test_a_key_always_goes_to_the_same_engine_whatever_the_order() -> None:
    engines = idle("a", "b", "c")
    for i in range(50):
        key = f"session-{i}"
        assert pick(engines, key) == pick(list(reversed(engines)), key)


def test_keys_spread_over_the_engines() -> None:
    homes = [pick(idle("a", "b", "c"), f"session-{i}") for i in range(600)]
    for name in "abc":
        assert 120 < homes.count(name) < 280, homes.count(name)


def test_an_engine_leaving_moves_only_its_own_keys() -> None:
    keys = [f"session-{i}" for i in range(300)]
    before = {k: pick(idle("a", "b", "c"), k) for k in keys}
    after = {k: pick(idle("a", "c"), k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert moved
    assert all(before[k] == "b" for k in moved)


def test_a_busy_home_is_overridden_only_past_the_imbalance() -> None:
    key = next(f"s{i}" for i in range(100) if pick(idle("a", "b"), f"s{i}") == "a")
    assert pick([Candidate("a", 4), Candidate("b", 0)], key) == "a"  # 4 is not over 4
    choice = choose(
        [Candidate("a", 5), Candidate("b", 0)], routing="affinity", key=key, imbalance=4, turn=0
    )
    assert choice.name == "b"
    assert choice.reason.startswith("least-load (a over by 5")


def test_least_load_and_round_robin() -> None:
    loaded = [Candidate("a", 3), Candidate("b", 1), Candidate("c", 2)]
    assert pick(loaded, "any", routing="least-load") == "b"
    assert pick(loaded, "", routing="affinity") == "b"  # no key: nothing to keep together
    assert [pick(loaded, "k", routing="round-robin", turn=t) for t in range(4)] == [
        "a",
        "b",
        "c",
        "a",
    ]
