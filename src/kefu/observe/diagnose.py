"""Where does the latency live? A verdict a person acts on, from a ``/stats`` summary (pure).

Thresholds are the ones operators in the field use (README.md, "Observe"):
TTFT < 500 ms excellent, < 1 s good, < 2 s acceptable, else poor; queue wait
over 30 % of E2E means compute is saturated; a timeout error rate over 1 % is a
fault; TTFT that grows with the turn number means context management is off.
Admission's refusals are judged as capacity only where the engine was full when it
refused; refusals while a slot was free are admission's miscalibration, with how its
predictions compared with the outcomes, unless prompts were still to be read ahead of them
and the predictions held (a tenth of first tokens came at or after them): then reading
prompts is the bottleneck. Under --admission-shadow, the refusals it would have made are
judged by what then happened to those requests (at least 90 % should have missed the SLO).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kefu.errors import KefuError, Overloaded, QueueFull, QueueTimeout, RequestError

Status = Literal["ok", "warn", "fail"]

TTFT_GRADES = ((500, "excellent"), (1000, "good"), (2000, "acceptable"))
QUEUE_SHARE_LIMIT = 0.30
TIMEOUT_RATE_LIMIT = 0.01
ERROR_RATE_LIMIT = 0.01
# A burst refused now and then is admission doing its job (a fast 503 instead of a long
# wait); a steady share of refusals says the engines are too few for the load.
REFUSAL_RATE_LIMIT = 0.05
# Under --admission-shadow, the share of would-be refusals that must really have missed the
# SLO before switching the predictions on turns away few requests that would make it.
SHADOW_PRECISION = 0.9
TURN_GROWTH_LIMIT = 0.5  # TTFT p50 of the latest turn vs the first
TURN_GROWTH_MIN_MS = 200
GATEWAY_WARN_MS = 50
# Redis on the request path: a call slower than this at p99, or stages waiting on it
# (auth, limits, the session lock and read) past this share of E2E, is where time goes.
REDIS_SLOW_MS = 10
REDIS_STAGE_SHARE = 0.2
REDIS_STAGES = ("auth", "limits", "session")
MIN_PER_TURN = 3


def _codes(base: type[KefuError]) -> set[str]:
    return {base.code}.union(*(_codes(sub) for sub in base.__subclasses__()))


# The caller's mistakes (every RequestError, 4xx): reported, but they say nothing about the
# server's health.
CLIENT_ERROR_CODES = _codes(RequestError)
# Admission's capacity refusals: 503s by design, not faults. (queue_timeout, its third,
# is judged with the timeouts.)
REFUSAL_CODES = {Overloaded.code, QueueFull.code}


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    status: Status
    message: str


@dataclass(slots=True)
class Verdict:
    samples: int
    findings: list[Finding] = field(default_factory=list)

    @property
    def status(self) -> str:
        if any(f.status == "fail" for f in self.findings):
            return "unhealthy"
        return "healthy"

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "healthy" else 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "samples": self.samples,
            "findings": [asdict(f) for f in self.findings],
        }

    def render(self) -> str:
        marks = {"ok": "  ok ", "warn": " warn", "fail": " FAIL"}
        lines = [f"kefu diagnose: {self.status.upper()} ({self.samples} answers in the window)"]
        lines += [f"{marks[f.status]}  {f.check:<10} {f.message}" for f in self.findings]
        return "\n".join(lines)


def diagnose(summary: dict[str, Any]) -> Verdict:
    verdict = Verdict(samples=int(summary.get("requests", 0)))
    for check in (
        _stages,
        _ttft,
        _queue,
        _turn_growth,
        _gateway,
        _redis,
        _timeouts,
        _refusals,
        _shadow,
        _errors,
    ):
        finding = check(summary)
        if finding is not None:
            verdict.findings.append(finding)
    verdict.findings += _engines(summary)
    return verdict


def _engines(s: dict[str, Any]) -> list[Finding]:
    """A pool of remote engines: one line per engine, with what its own metrics report."""
    findings = []
    slow = s.get("slow_engine")
    rows = s.get("engines") or []
    for row in rows:
        ttft = row["upstream_ttft_ms"]
        figures = [
            f"{row['answers']} answers, {row['failed']} failed",
            f"TTFT p50 {ttft['p50']:.0f} ms" if ttft["p50"] is not None else "no TTFT yet",
            f"{row['in_flight']} in flight",
        ]
        if row.get("queue") is not None:
            figures.append(f"its queue {row['queue']:g}")
        if row.get("kv_usage") is not None:
            figures.append(f"KV cache {row['kv_usage']:.0%} used")
        text = f"{row['name']}: breaker {row['breaker']}; " + ", ".join(figures)
        status: Status = "ok"
        if row["breaker"] != "closed":
            status = "fail" if all(r["breaker"] == "open" for r in rows) else "warn"
            text += " (tripped: it gets no requests until a health check passes)"
        if row["name"] == slow:
            status = "fail" if status == "fail" else "warn"
            text += (
                ": the slow engine, well behind the others; its sessions stay on it with "
                "affinity. Check its queue and KV cache, or lower --imbalance"
            )
        findings.append(Finding("engine", status, text))
    return findings


def _stages(s: dict[str, Any]) -> Finding | None:
    shares: dict[str, float] = s.get("stage_share") or {}
    if not shares:
        return None
    top = sorted(shares.items(), key=lambda kv: kv[1], reverse=True)
    text = ", ".join(f"{name} {share:.0%}" for name, share in top if share >= 0.005)
    return Finding("stages", "ok", f"share of E2E by stage: {text}")


def _ttft(s: dict[str, Any]) -> Finding | None:
    ttft = s.get("ttft_ms") or {}
    p95 = ttft.get("p95")
    if p95 is None:
        return None
    grade = next((name for limit, name in TTFT_GRADES if p95 < limit), "poor")
    figures = f"TTFT p50 {ttft.get('p50'):.0f} ms, p95 {p95:.0f} ms, p99 {ttft.get('p99'):.0f} ms"
    status: Status = "fail" if grade == "poor" else "warn" if grade == "acceptable" else "ok"
    advice = "" if status == "ok" else " (users notice past 1 s; see the queue and stages below)"
    return Finding("ttft", status, f"{figures}: {grade}{advice}")


def _queue(s: dict[str, Any]) -> Finding | None:
    share = s.get("queue_share")
    if share is None:
        return None
    queue = s.get("queue_ms") or {}
    load = s.get("load") or {}
    figures = (
        f"requests spend {share:.0%} of E2E waiting for the engine (queue p95 "
        f"{queue.get('p95') or 0:.0f} ms, up to {load.get('waiting_max', 0)} waiting, "
        f"{load.get('running_max', 0)} running)"
    )
    if share > QUEUE_SHARE_LIMIT:
        return Finding(
            "queue",
            "fail",
            f"{figures}: compute is saturated, the queue is the bottleneck; add engine "
            "replicas, raise --parallel if the KV cache has room, or shed load earlier "
            "(--max-queue)",
        )
    return Finding("queue", "ok", figures)


def _turn_growth(s: dict[str, Any]) -> Finding | None:
    turns = {
        int(turn): row["p50"]
        for turn, row in (s.get("ttft_less_queue_by_turn") or {}).items()
        if row.get("count", 0) >= MIN_PER_TURN and row.get("p50") is not None
    }
    if len(turns) < 2:
        return None
    first, last = min(turns), max(turns)
    growth = (turns[last] - turns[first]) / max(turns[first], 1e-9)
    figures = (
        f"TTFT less queue wait, p50: turn {first} {turns[first]:.0f} ms, turn {last} "
        f"{turns[last]:.0f} ms ({growth:+.0%})"
    )
    if growth > TURN_GROWTH_LIMIT and turns[last] - turns[first] > TURN_GROWTH_MIN_MS:
        return Finding(
            "turns",
            "fail",
            f"{figures}: the prompt grows with every turn, so context management is off; "
            "lower --history-turns or summarise older turns",
        )
    return Finding("turns", "ok", figures)


def _gateway(s: dict[str, Any]) -> Finding | None:
    gateway = s.get("gateway_ms") or {}
    p50 = gateway.get("p50")
    if p50 is None:
        return None
    figures = (
        f"time in kefu itself (E2E less queue, prefill, decode): p50 {p50:.1f} ms, "
        f"p99 {gateway.get('p99') or 0:.1f} ms"
    )
    status: Status = "warn" if p50 > GATEWAY_WARN_MS else "ok"
    return Finding("gateway", status, figures)


def _redis(s: dict[str, Any]) -> Finding | None:
    redis = s.get("redis")
    if not redis:
        return None
    shares: dict[str, float] = s.get("stage_share") or {}
    waiting = sum(shares.get(stage, 0.0) for stage in REDIS_STAGES)
    figures = (
        f"Redis: {redis['calls']} calls, p50 {redis['p50_ms']:.2f} ms, p99 "
        f"{redis['p99_ms']:.2f} ms, {redis['errors']} failed; auth, limits and session "
        f"stages {waiting:.0%} of E2E"
    )
    if redis["errors"]:
        return Finding(
            "redis",
            "fail",
            f"{figures}: Redis is failing or timing out, and what needs it answers 503; "
            "check that it is up and not out of memory (kefu_redis_errors_total by op)",
        )
    if redis["p99_ms"] > REDIS_SLOW_MS or waiting > REDIS_STAGE_SHARE:
        return Finding(
            "redis",
            "warn",
            f"{figures}: Redis is where the time goes; put it nearer the replicas (same "
            "host or zone), give it a CPU of its own, or raise --redis-pool if calls wait "
            "for a connection",
        )
    return Finding("redis", "ok", figures)


def _timeouts(s: dict[str, Any]) -> Finding | None:
    requests = int(s.get("requests", 0))
    if not requests:
        return None
    rate = int(s.get("timeouts", 0)) / requests
    text = f"timeout error rate {rate:.1%} ({s.get('timeouts', 0)} of {requests})"
    if rate > TIMEOUT_RATE_LIMIT:
        return Finding("timeouts", "fail", f"{text}: over 1 % is a fault")
    return Finding("timeouts", "ok", text)


def _refusals(s: dict[str, Any]) -> Finding | None:
    """Admission's refusals: capacity only where the engine was full when it refused; a
    refusal while a slot was free is admission's prediction at fault, named with how its
    predictions compared with what happened, unless prompts were still to be read ahead
    of it and the predictions held: then it is the reading's."""
    requests = int(s.get("requests", 0))
    codes = {k: v for k, v in (s.get("errors_by_code") or {}).items() if k in REFUSAL_CODES}
    if not requests or not codes:
        return None
    refused = sum(codes.values())
    rate = refused / requests
    detail = ", ".join(f"{code} {n}" for code, n in sorted(codes.items()))
    status: Status = "fail" if rate > REFUSAL_RATE_LIMIT else "warn"
    admission = s.get("admission") or {}
    counts = admission.get("refusals") or {}
    counted = counts.get("total", 0)
    free = counts.get("with_free_slot", 0)
    room = counts.get("with_room", free)
    if counted and free * 2 >= counted and (room * 2 >= counted or not _held(admission)):
        return Finding(
            "admission",
            status,
            f"admission refused {rate:.1%} ({refused} of {requests}: {detail}), {free} of "
            f"{counted} while an engine slot was free: the engine had room, so this is "
            f"admission's prediction, not capacity ({_predictions(admission)}); check "
            "--admission-quantile and --ttft-slo, measure with --admission-shadow, or use "
            "--admission queue",
        )
    if counted and free * 2 >= counted:
        return Finding(
            "reading",
            status,
            f"admission refused {rate:.1%} ({refused} of {requests}: {detail}), {free} of "
            f"{counted} while an engine slot was free but prompts let in before them were "
            f"still to be read, and the predictions held ({_predictions(admission)}): "
            "reading prompts is the bottleneck at this load; shorter prompts "
            "(--kb-passages, --history-turns; /chat fits its own under load unless "
            "--no-fit-to-slo), more engines or replicas, or a longer --ttft-slo",
        )
    text = (
        f"admission refused {rate:.1%} ({refused} of {requests}: {detail}"
        + (f", {counted - free} with every slot busy" if counted else "")
        + "): the engines are full at this load; add engines or replicas, or raise "
        "--ttft-slo or --max-queue if customers may wait longer"
    )
    return Finding("capacity", status, text)


def _shadow(s: dict[str, Any]) -> Finding | None:
    """Under --admission-shadow: what the predictions would have refused, against what then
    happened to those requests (all admitted), by the rule that would have refused."""
    admission = s.get("admission") or {}
    if not admission.get("shadow"):
        return None
    predictions = admission.get("predictions") or {}
    would = predictions.get("would_refuse") or {}
    missed, made = int(would.get("missed", 0)), int(would.get("made", 0))
    if not missed + made:
        outcomes = predictions.get("outcomes", 0)
        return Finding("shadow", "ok", f"would have refused none of {outcomes} admitted")
    rules = ", ".join(
        f"{rule} {c['missed']} of {c['missed'] + c['made']}"
        for rule, c in (would.get("by_rule") or {}).items()
        if c["missed"] + c["made"]
    )
    recall = predictions.get("recall")
    slo = admission.get("ttft_slo_s")
    text = (
        f"would have refused {missed + made} admitted requests; {missed} of them missed the "
        + (f"{slo:g} s SLO" if isinstance(slo, int | float) else "SLO")
        + f" ({missed / (missed + made):.0%}"
        + (f"; by rule: {rules}" if rules else "")
        + ")"
        + (f", {recall:.0%} of the misses" if recall is not None else "")
    )
    if missed / (missed + made) >= SHADOW_PRECISION:
        return Finding("shadow", "ok", text)
    return Finding(
        "shadow",
        "warn",
        f"{text}: under --admission predicted, {made} of those refusals would have turned "
        "away a request that made it; measure longer at this load before switching",
    )


def _held(admission: dict[str, Any]) -> bool:
    """Whether the predictions refusals rest on held: a tenth or more of the admitted
    requests' first tokens came at or after their prediction (it is a 90th percentile),
    not all well before it."""
    ratio = (admission.get("predictions") or {}).get("ratio_p90")
    return ratio is not None and ratio >= 1.0


def _predictions(admission: dict[str, Any]) -> str:
    """How admission's predictions compared with the outcomes, in words."""
    predictions = admission.get("predictions") or {}
    if not predictions.get("outcomes"):
        return "no outcome measured yet"
    return (
        f"first tokens came at {predictions['ratio_p50']:g}x the predicted time at the "
        f"median, {predictions['ratio_p90']:g}x at p90, over {predictions['outcomes']} "
        "admitted requests"
    )


def _errors(s: dict[str, Any]) -> Finding | None:
    requests = int(s.get("requests", 0))
    judged = REFUSAL_CODES | {QueueTimeout.code}  # each has a finding of its own
    codes = {k: v for k, v in (s.get("errors_by_code") or {}).items() if k not in judged}
    if not requests or not codes:
        return None
    server = {k: v for k, v in codes.items() if k not in CLIENT_ERROR_CODES}
    detail = ", ".join(f"{code} {n}" for code, n in sorted(codes.items()))
    if not server:
        return Finding("errors", "ok", f"only client errors: {detail}")
    rate = sum(server.values()) / requests
    status: Status = "fail" if rate > ERROR_RATE_LIMIT else "warn"
    return Finding("errors", status, f"server error rate {rate:.1%} ({detail})")
