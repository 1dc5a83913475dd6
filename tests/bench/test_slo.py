"""--slo strings: bounds in seconds, and one-line errors naming the bad part."""

from __future__ import annotations

import pytest

from kefu.bench.slo import Slo, SloError, parse_slo


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ttft=1s", Slo(ttft=1.0)),
        ("ttft=1s,e2e=5s", Slo(ttft=1.0, e2e=5.0)),
        ("TTFT=500ms, tpot=50ms", Slo(ttft=0.5, tpot=0.05)),
        ("e2e=2.5", Slo(e2e=2.5)),
        ("ttft=.25s", Slo(ttft=0.25)),
        ("none", Slo()),
        ("", Slo()),
    ],
)
def test_parse(text: str, expected: Slo) -> None:
    assert parse_slo(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ttft", "not METRIC=VALUE"),
        ("latency=1s", "unknown metric 'latency'"),
        ("ttft=fast", "not a duration"),
        ("ttft=1h", "not a duration"),
        ("ttft=0", "positive"),
        ("ttft=-1s", "not a duration"),
        ("ttft=1s,ttft=2s", "given twice"),
    ],
)
def test_errors_name_the_flag_and_the_part(text: str, says: str) -> None:
    with pytest.raises(SloError) as info:
        parse_slo(text)
    message = str(info.value)
    assert message.startswith(f"--slo {text!r}: ")
    assert says in message
    assert "\n" not in message


def test_str_round_trips() -> None:
    slo = Slo(ttft=0.5, e2e=5.0)
    assert str(slo) == "ttft=500ms,e2e=5s"
    assert parse_slo(str(slo)) == slo
    assert str(Slo()) == "none"
