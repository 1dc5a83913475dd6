"""Wire models of the routes outside the endpoint folders: the error envelope, the probes,
/stats and /diagnose. The routes build plain dicts (they are hot or large); these models
describe them in /openapi.json, and the tests hold the routes to them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _without_nul(value: str) -> str:
    # Valid JSON, but no customer types it, and C strings (and some tools reading the
    # stored conversation) stop at it.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters (\\u0000)")
    return value


# A text field of a request that is stored: no NUL character.
NoNul = (AfterValidator(_without_nul), Field(json_schema_extra={"pattern": r"^[^\x00]*$"}))


class ErrorDetail(BaseModel):
    message: str = Field(description="What went wrong, in words a caller can act on.")
    type: str = Field(description="The error's class: invalid_request_error, not_found_error, …")
    param: str | None = Field(description="The request field or parameter at fault, if any.")
    code: str | None = Field(description="A stable, machine-readable code: queue_full, …")


class ErrorEnvelope(BaseModel):
    """Every error kefu sends, in the OpenAI shape (also in-band, as an SSE ``error`` event)."""

    model_config = ConfigDict(extra="forbid")
    error: ErrorDetail


class HealthOut(BaseModel):
    status: Literal["ok"]


class PromptReadingOut(BaseModel):
    """How long the engine takes to read a prompt, as admission measures it: a fixed part
    and a time per token left to read, fitted to the recent prompts."""

    samples: int = Field(description="Prompts measured since the start")
    fixed_s: float = Field(description="Seconds any prompt takes, about one engine step")
    per_token_ms: float = Field(description="Milliseconds per token the engine must read")


class RuleOutcomesOut(BaseModel):
    missed: int
    made: int


class WouldRefuseOut(BaseModel):
    missed: int = Field(description="Admitted requests it said to refuse that missed the SLO")
    made: int = Field(description="Admitted requests it said to refuse that made the SLO")
    precision: float | None = Field(description="missed / (missed + made)")
    by_rule: dict[str, RuleOutcomesOut] = Field(
        description="The same by the rule that said refuse: 'curve' (requests estimated "
        "alike mostly missed), 'far' (past twice the SLO, no outcomes that long), 'probe' "
        "(a fresh server's probe in flight), 'late' (waited in line past the moment a slot "
        "could still start it within the SLO)"
    )


class NearSloOut(BaseModel):
    outcomes: int
    ratio_p50: float | None
    ratio_p90: float | None
    within_prediction: float | None


class PredictionsOut(BaseModel):
    """Admission's predicted first-token times beside what then happened (recent window)."""

    outcomes: int = Field(description="Recent admitted requests with an outcome")
    recorded: int = Field(description="Outcomes recorded since the start")
    calibrated: bool = Field(description="Enough outcomes for a prediction to refuse on")
    quantile: float = Field(description="The quantile of the TTFT a prediction stands for")
    correction: float = Field(
        description="Factor from the rates' estimate to the prediction: recent realized / "
        "estimated at that quantile"
    )
    ratio_p50: float | None = Field(description="Realized / predicted TTFT, median")
    ratio_p90: float | None = Field(description="Realized / predicted TTFT, 90th percentile")
    within_prediction: float | None = Field(
        description="Share of outcomes at or under their prediction (about the quantile when "
        "calibrated)"
    )
    near_slo: NearSloOut = Field(
        description="The predictions whose estimate was at least a quarter of the SLO: "
        "where refusals are decided, and what the correction is fitted to"
    )
    missed_slo: int = Field(description="Recent outcomes past the TTFT SLO")
    would_refuse: WouldRefuseOut = Field(
        description="Admitted requests the prediction said to refuse (--admission-shadow, "
        "--admission queue, or before calibration), by outcome"
    )
    admitted_missed: int = Field(description="Admitted requests it let in that missed the SLO")
    admitted_missed_unqueued: int = Field(
        description="Of those, the ones that met no queue (a free slot, nothing to read) and "
        "got their first token: the engine's own speed, no refusal owed"
    )
    recall: float | None = Field(description="Share of SLO misses it said to refuse")


class RefusalsOut(BaseModel):
    total: int
    by_code: dict[str, int]
    with_free_slot: int = Field(description="Refused while an engine slot was free")
    with_room: int = Field(
        description="Of those, refused with no prompt ahead to read (none let in unread, "
        "none in line): the engine had room"
    )


class AdmissionOut(BaseModel):
    running: int
    waiting: int
    reading: int = Field(
        description="Prompts let in whose first token has not come (held slots and tickets)"
    )
    prompt_reading: PromptReadingOut
    refused: dict[str, int] = Field(description="Requests refused so far, by error code")
    policy: Literal["predicted", "queue"]
    shadow: bool = Field(description="--admission-shadow: predictions recorded, never acted on")
    ttft_slo_s: float
    predictions: PredictionsOut
    refusals: RefusalsOut = Field(description="Refusals since the start (kept: the last 100 000)")


class ReadyOut(BaseModel):
    """200 once the model is warmed up and the knowledge base open; 503 with this body before."""

    model_config = ConfigDict(extra="allow")
    status: Literal["ready", "loading", "failed"]
    error: str | None
    model: str
    engine: dict[str, Any]
    admission: AdmissionOut
    groups: dict[str, AdmissionOut] | None = Field(
        None, description="With model groups: each group's own admission, by group name"
    )
    knowledge_base: dict[str, Any] | None = None


class Spread(BaseModel):
    p50: float | None
    p95: float | None
    p99: float | None


class StatsOut(BaseModel):
    """The recent window summarised (the dashboard's source)."""

    model_config = ConfigDict(extra="allow")
    window_s: float
    requests: int
    errors: int
    timeouts: int
    errors_by_code: dict[str, int]
    tiers: dict[str, int]
    requests_per_s: float
    tokens_per_s: float
    ttft_ms: Spread
    e2e_ms: Spread
    tpot_ms: Spread
    queue_ms: Spread
    prefill_ms: Spread
    gateway_ms: Spread
    queue_share: float | None
    stage_share: dict[str, float]
    series: list[dict[str, Any]]


class FindingOut(BaseModel):
    check: str
    status: Literal["ok", "warn", "fail"]
    message: str


class DiagnosisOut(BaseModel):
    status: str
    samples: int
    findings: list[FindingOut]
    window_s: float
