"""diagnose(): verdicts from hand-made /stats summaries (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kefu.observe.diagnose import Finding, Verdict, diagnose


def healthy(**overrides: Any) -> dict[str, Any]:
    """A summary of a server with room to spare."""
    summary: dict[str, Any] = {
        "window_s": 300.0,
        "requests": 100,
        "errors": 0,
        "timeouts": 0,
        "errors_by_code": {},
        "tiers": {"llm": 100},
        "ttft_ms": {"p50": 120.0, "p95": 300.0, "p99": 400.0},
        "e2e_ms": {"p50": 900.0, "p95": 1500.0, "p99": 1800.0},
        "queue_ms": {"p50": 1.0, "p95": 5.0, "p99": 8.0},
        "gateway_ms": {"p50": 2.0, "p95": 4.0, "p99": 6.0},
        "queue_share": 0.02,
        "stage_share": {"decode": 0.8, "prefill": 0.1, "queue": 0.02, "send": 0.08},
        "ttft_less_queue_by_turn": {
            "1": {"count": 5, "p50": 100.0},
            "2": {"count": 5, "p50": 110.0},
        },
        "load": {"running_max": 4, "waiting_max": 0},
    }
    summary.update(overrides)
    return summary


def finding(verdict: Verdict, check: str) -> Finding | None:
    found = [f for f in verdict.findings if f.check == check]
    assert len(found) <= 1, found
    return found[0] if found else None


def the(verdict: Verdict, check: str) -> Finding:
    result = finding(verdict, check)
    assert result is not None, f"no {check!r} finding in {verdict.findings}"
    return result


def turns(first: tuple[int, float], last: tuple[int, float]) -> dict[str, Any]:
    """ttft_less_queue_by_turn with turn 1 and turn 3: (count, p50) each."""
    return {
        "1": {"count": first[0], "p50": first[1]},
        "3": {"count": last[0], "p50": last[1]},
    }


def test_healthy_summary() -> None:
    verdict = diagnose(healthy())
    assert verdict.status == "healthy"
    assert verdict.exit_code == 0
    assert verdict.samples == 100
    assert [f.check for f in verdict.findings] == [
        "stages",
        "ttft",
        "queue",
        "turns",
        "gateway",
        "timeouts",
    ]
    assert all(f.status == "ok" for f in verdict.findings), verdict.findings


def test_stages_finding_lists_shares_largest_first() -> None:
    message = the(diagnose(healthy()), "stages").message
    assert "decode 80%, prefill 10%, send 8%, queue 2%" in message


def test_queue_over_the_limit_is_the_bottleneck() -> None:
    summary = healthy(
        queue_share=0.6,
        queue_ms={"p50": 900.0, "p95": 2400.0, "p99": 3000.0},
        load={"running_max": 1, "waiting_max": 23},
    )
    verdict = diagnose(summary)
    queue = the(verdict, "queue")
    assert queue.status == "fail"
    assert "queue is the bottleneck" in queue.message
    assert "60%" in queue.message
    assert "2400 ms" in queue.message
    assert "up to 23 waiting" in queue.message
    assert verdict.status == "unhealthy"
    assert verdict.exit_code == 1


@pytest.mark.parametrize(("share", "status"), [(0.30, "ok"), (0.3001, "fail"), (0.0, "ok")])
def test_queue_share_limit(share: float, status: str) -> None:
    assert the(diagnose(healthy(queue_share=share)), "queue").status == status


def test_no_queue_share_no_queue_finding() -> None:
    assert finding(diagnose(healthy(queue_share=None)), "queue") is None


@pytest.mark.parametrize(
    ("p95", "grade", "status", "exit_code"),
    [
        (100, "excellent", "ok", 0),
        (499, "excellent", "ok", 0),
        (500, "good", "ok", 0),
        (999, "good", "ok", 0),
        (1000, "acceptable", "warn", 0),
        (1999, "acceptable", "warn", 0),
        (2000, "poor", "fail", 1),
        (9000, "poor", "fail", 1),
    ],
)
def test_ttft_grades(p95: float, grade: str, status: str, exit_code: int) -> None:
    verdict = diagnose(healthy(ttft_ms={"p50": p95 / 2, "p95": p95, "p99": p95}))
    ttft = the(verdict, "ttft")
    assert ttft.status == status
    assert f": {grade}" in ttft.message
    assert f"p95 {p95:.0f} ms" in ttft.message
    assert verdict.exit_code == exit_code


def test_no_ttft_no_ttft_finding() -> None:
    no_ttft = {"p50": None, "p95": None, "p99": None}
    assert finding(diagnose(healthy(ttft_ms=no_ttft)), "ttft") is None


@pytest.mark.parametrize(
    ("first", "last", "status"),
    [
        ((3, 100.0), (3, 400.0), "fail"),  # +300 %, +300 ms
        ((3, 100.0), (3, 160.0), "ok"),  # +60 %, but only +60 ms
        ((3, 1000.0), (3, 1300.0), "ok"),  # +300 ms, but only +30 %
        ((3, 400.0), (3, 600.0), "ok"),  # exactly +50 % and +200 ms: not over
        ((3, 400.0), (3, 601.0), "fail"),  # just over both
        ((3, 500.0), (3, 300.0), "ok"),  # shrinking
        ((2, 100.0), (3, 400.0), None),  # turn 1 has too few samples: nothing to compare
        ((3, 100.0), (2, 400.0), None),  # turn 3 has too few samples
    ],
)
def test_turn_growth(first: tuple[int, float], last: tuple[int, float], status: str | None) -> None:
    verdict = diagnose(healthy(ttft_less_queue_by_turn=turns(first, last)))
    growth = finding(verdict, "turns")
    if status is None:
        assert growth is None
        return
    assert growth is not None
    assert growth.status == status
    assert f"turn 1 {first[1]:.0f} ms, turn 3 {last[1]:.0f} ms" in growth.message
    if status == "fail":
        assert "context management is off" in growth.message
        assert verdict.exit_code == 1


def test_turn_growth_compares_turn_numbers_not_strings() -> None:
    by_turn = {
        "2": {"count": 5, "p50": 100.0},
        "10": {"count": 5, "p50": 900.0},  # "10" < "2" as strings
    }
    growth = the(diagnose(healthy(ttft_less_queue_by_turn=by_turn)), "turns")
    assert growth.status == "fail"
    assert "turn 2 100 ms, turn 10 900 ms" in growth.message


def test_turn_growth_skips_turns_without_enough_samples() -> None:
    by_turn = {
        "1": {"count": 4, "p50": 100.0},
        "2": {"count": 3, "p50": 120.0},
        "3": {"count": 1, "p50": 5000.0},  # one slow outlier: ignored
    }
    growth = the(diagnose(healthy(ttft_less_queue_by_turn=by_turn)), "turns")
    assert growth.status == "ok"
    assert "turn 1 100 ms, turn 2 120 ms" in growth.message


@pytest.mark.parametrize(
    ("requests", "timeouts", "status"),
    [(100, 0, "ok"), (100, 1, "ok"), (1000, 10, "ok"), (1000, 11, "fail"), (100, 50, "fail")],
)
def test_timeout_rate(requests: int, timeouts: int, status: str) -> None:
    summary = healthy(
        requests=requests,
        timeouts=timeouts,
        errors=timeouts,
        errors_by_code={"queue_timeout": timeouts} if timeouts else {},
    )
    verdict = diagnose(summary)
    finding_ = the(verdict, "timeouts")
    assert finding_.status == status
    assert f"({timeouts} of {requests})" in finding_.message
    if status == "fail":
        assert "over 1 % is a fault" in finding_.message
        assert verdict.exit_code == 1
    # queue timeouts are judged as timeouts, not again as other errors
    assert finding(verdict, "errors") is None


def test_no_requests_no_rates() -> None:
    verdict = diagnose({"requests": 0})
    assert verdict.findings == []
    assert verdict.status == "healthy"


@pytest.mark.parametrize(
    ("errors_by_code", "status"),
    [
        ({"engine_error": 1}, "warn"),  # 1 %: not over the limit
        ({"engine_error": 2}, "fail"),
        ({"engine_error": 1, "internal_error": 1}, "fail"),
    ],
)
def test_other_errors(errors_by_code: dict[str, int], status: str) -> None:
    verdict = diagnose(healthy(errors_by_code=errors_by_code, errors=sum(errors_by_code.values())))
    errors = the(verdict, "errors")
    assert errors.status == status
    for code, n in errors_by_code.items():
        assert f"{code} {n}" in errors.message
    assert verdict.exit_code == (1 if status == "fail" else 0)


@pytest.mark.parametrize(
    ("errors_by_code", "status"),
    [
        ({"overloaded": 1}, "warn"),
        ({"queue_full": 3, "overloaded": 2}, "warn"),  # 5 %: not over the limit
        ({"overloaded": 6}, "fail"),
        ({"queue_full": 4, "overloaded": 2}, "fail"),
    ],
)
def test_admission_refusals_are_capacity_not_server_errors(
    errors_by_code: dict[str, int], status: str
) -> None:
    summary = healthy(errors_by_code=errors_by_code, errors=sum(errors_by_code.values()))
    verdict = diagnose(summary)
    capacity = the(verdict, "capacity")
    assert capacity.status == status
    refused = sum(errors_by_code.values())
    assert f"admission refused {refused / 100:.1%} ({refused} of 100" in capacity.message
    for code, n in errors_by_code.items():
        assert f"{code} {n}" in capacity.message
    # a refusal is a fast 503 by design: never counted again as the server's own error
    assert finding(verdict, "errors") is None
    assert verdict.exit_code == (1 if status == "fail" else 0)


def admission_block(
    total: int, free: int, room: int | None = None, ratios: tuple[float, float] = (0.08, 0.21)
) -> dict[str, Any]:
    """/stats' admission block: ``total`` refusals, ``free`` of them with a slot free,
    ``room`` of those with no prompt ahead to read (all of them if None); first tokens at
    ``ratios`` (p50, p90) of their predictions."""
    refusals = {"total": total, "by_code": {"overloaded": total}, "with_free_slot": free}
    refusals["with_room"] = free if room is None else room
    predictions = {"outcomes": 40, "ratio_p50": ratios[0], "ratio_p90": ratios[1]}
    return {"predictions": predictions, "refusals": refusals}


def test_refusals_while_a_slot_was_free_are_admission_not_capacity() -> None:
    """A fresh server refused 31 of 32 requests it would have served, and diagnose told the
    operator to add engines: refused with room, it names admission, with its ratio."""
    summary = healthy(
        errors_by_code={"overloaded": 31}, errors=31, admission=admission_block(31, 30)
    )
    verdict = diagnose(summary)
    assert finding(verdict, "capacity") is None
    admission = the(verdict, "admission")
    assert admission.status == "fail"
    assert "30 of 31 while an engine slot was free" in admission.message
    assert "0.08x the predicted time at the median, 0.21x at p90" in admission.message
    assert "add engines" not in admission.message


def test_refusals_with_a_slot_free_but_prompts_ahead_and_predictions_held_are_reading() -> None:
    """diagnose's own probe on a fresh server: four first turns at once, a slot free for
    each, but their prompts read one after another; the predictions came true, so the
    refusals were the reading's, not a miscalibration."""
    block = admission_block(3, 3, room=0, ratios=(1.05, 1.69))
    verdict = diagnose(healthy(errors_by_code={"overloaded": 3}, errors=3, admission=block))
    assert finding(verdict, "admission") is None
    assert finding(verdict, "capacity") is None
    reading = the(verdict, "reading")
    assert "prompts let in before them were still to be read" in reading.message
    assert "1.05x the predicted time at the median, 1.69x at p90" in reading.message


def test_prompts_ahead_do_not_excuse_predictions_that_did_not_hold() -> None:
    """The fresh server that refused 31 of 32: prompts were ahead of each refusal, but first
    tokens came at a fifth of their predictions: admission's prediction is at fault."""
    block = admission_block(31, 30, room=0)
    verdict = diagnose(healthy(errors_by_code={"overloaded": 31}, errors=31, admission=block))
    assert finding(verdict, "reading") is None
    assert "admission's prediction, not capacity" in the(verdict, "admission").message


def test_refusals_with_every_slot_busy_are_capacity() -> None:
    summary = healthy(
        errors_by_code={"overloaded": 31}, errors=31, admission=admission_block(31, 2)
    )
    capacity = the(diagnose(summary), "capacity")
    assert "29 with every slot busy" in capacity.message
    assert "add engines or replicas" in capacity.message


def test_refusals_and_server_errors_are_judged_apart() -> None:
    codes = {"engine_error": 1, "overloaded": 30, "queue_timeout": 1, "not_found": 2}
    verdict = diagnose(healthy(errors_by_code=codes, errors=34, timeouts=1))
    assert the(verdict, "capacity").status == "fail"
    errors = the(verdict, "errors")
    # 1 % of server errors (engine_error alone) is under the error limit
    assert errors.status == "warn"
    assert "server error rate 1.0%" in errors.message
    assert "overloaded" not in errors.message
    assert "queue_timeout" not in errors.message


def test_gateway_over_50_ms_warns_but_stays_healthy() -> None:
    verdict = diagnose(healthy(gateway_ms={"p50": 60.0, "p95": 80.0, "p99": 90.0}))
    assert the(verdict, "gateway").status == "warn"
    assert "p50 60.0 ms" in the(verdict, "gateway").message
    assert verdict.status == "healthy"
    assert verdict.exit_code == 0


def test_render_has_a_headline_and_every_finding() -> None:
    verdict = diagnose(
        healthy(
            queue_share=0.6,
            errors_by_code={"engine_error": 5},
            gateway_ms={"p50": 60.0, "p95": 80.0, "p99": 90.0},
        )
    )
    text = verdict.render()
    lines = text.splitlines()
    assert lines[0] == "kefu diagnose: UNHEALTHY (100 answers in the window)"
    assert len(lines) == 1 + len(verdict.findings)
    for f, line in zip(verdict.findings, lines[1:], strict=True):
        assert f.check in line
        assert f.message in line
        assert {"ok": "ok", "warn": "warn", "fail": "FAIL"}[f.status] in line.split()[0]
    assert "queue is the bottleneck" in text


def test_render_healthy_headline() -> None:
    assert diagnose(healthy()).render().startswith("kefu diagnose: HEALTHY (100 answers")


def test_as_dict_is_json() -> None:
    verdict = diagnose(healthy(queue_share=0.6))
    data = json.loads(json.dumps(verdict.as_dict()))
    assert data["status"] == "unhealthy"
    assert data["samples"] == 100
    assert {"check": "queue", "status": "fail"}.items() <= data["findings"][2].items()
    assert all(set(f) == {"check", "status", "message"} for f in data["findings"])


def test_every_request_error_is_the_callers_not_the_servers() -> None:
    """A slow body (408) or another agent's claim (409) is the caller's, as a 404 is: the
    codes come from the error hierarchy, so a new RequestError is never a server error."""
    codes = {"request_timeout": 3, "session_conflict": 2, "not_found": 1}
    verdict = diagnose(healthy(errors_by_code=codes, errors=6))
    errors = the(verdict, "errors")
    assert errors.status == "ok"
    assert errors.message.startswith("only client errors")


def shadow_block(missed: int, made: int) -> dict[str, Any]:
    """/stats' admission block under --admission-shadow: would-be refusals by outcome."""
    by_rule = {"curve": {"missed": missed - 2, "made": made}, "far": {"missed": 2, "made": 0}}
    by_rule["probe"] = {"missed": 0, "made": 0}
    return {
        "shadow": True,
        "ttft_slo_s": 2.0,
        "predictions": {
            "outcomes": 120,
            "would_refuse": {"missed": missed, "made": made, "by_rule": by_rule},
            "recall": 0.5,
        },
        "refusals": {"total": 0, "by_code": {}, "with_free_slot": 0},
    }


def test_shadow_refusals_are_judged_by_what_happened_to_those_requests() -> None:
    shadow = the(diagnose(healthy(admission=shadow_block(missed=47, made=3))), "shadow")
    assert shadow.status == "ok"
    assert "50 admitted requests; 47 of them missed the 2 s SLO (94%" in shadow.message
    assert "by rule: curve 45 of 48, far 2 of 2" in shadow.message  # probe refused none
    assert "50% of the misses" in shadow.message


def test_imprecise_shadow_refusals_warn_before_the_predictions_are_switched_on() -> None:
    verdict = diagnose(healthy(admission=shadow_block(missed=16, made=4)))
    shadow = the(verdict, "shadow")
    assert shadow.status == "warn"
    assert "4 of those refusals would have turned away a request that made it" in shadow.message
    assert verdict.status == "healthy"  # a warning: nothing is refused in shadow


def test_no_shadow_no_shadow_finding() -> None:
    assert finding(diagnose(healthy(admission=admission_block(0, 0))), "shadow") is None
