"""Settings of admission (slots, the waiting line, the TTFT SLO) and per-caller limits."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from kefu.limits.admission import DEFAULT_QUANTILE, DEFAULT_TTFT_SLO
from kefu.limits.rate import Rate
from kefu.settings.group import SettingsGroup


class LimitSettings(SettingsGroup):
    """Admission (slots, the waiting line, the TTFT SLO) and per-caller limits."""

    heading: ClassVar[str] = "admission and limits"

    max_queue: int = Field(
        64, ge=0, description="Requests that may wait for a slot; beyond this kefu answers 503."
    )
    queue_timeout: float = Field(
        30.0, gt=0, description="Seconds a request may wait for a slot before it fails (503)."
    )
    admission: Literal["predicted", "queue"] = Field(
        "predicted",
        description="How the LLM path admits requests: 'predicted' refuses at once (503 + "
        "Retry-After; on /chat a 'busy' answer with the nearest FAQ entries) a request that "
        "meets a queue and whose first token its calibrated prediction puts past "
        "--ttft-slo; 'queue' only bounds the line. Under either policy each prediction is "
        "recorded beside its outcome (/ready, /metrics).",
    )
    admission_shadow: bool = Field(
        False,
        description="Admit what --admission predicted would refuse, recording it: /ready "
        "and /metrics then show the refusals' precision (would-refuse requests that missed "
        "--ttft-slo) and recall (misses it would have refused), measured in one run.",
    )
    admission_quantile: float = Field(
        DEFAULT_QUANTILE,
        gt=0,
        lt=1,
        description="The quantile of the first-token time that admission's prediction "
        "stands for, calibrated on recent outcomes: a request is refused only when this "
        "quantile of its predicted wait lies past --ttft-slo and recent requests estimated "
        "alike mostly missed it, or, beyond what they reach (on a fresh server, everywhere), it "
        "lies past twice the SLO.",
    )
    ttft_slo: float = Field(
        DEFAULT_TTFT_SLO,
        gt=0,
        description="Seconds to the first token that --admission predicted aims for: a "
        "request predicted to wait longer is refused at once instead of failing later, and "
        "none waits in line longer than this.",
    )
    fit_to_slo: bool = Field(
        True,
        description="/chat under --admission predicted: a prompt the engine is predicted "
        "to read past --ttft-slo drops its oldest turns (their facts stay in the memory), "
        "then its least relevant passages (never the best), down to what it can read in "
        "time; only where that brings the prediction within the SLO (the answer's meta says "
        "what was left out). /v1 prompts are the client's and never shortened.",
    )
    rate_limit: str = Field(
        "30/60",
        description="Requests per authenticated key or user, as N/SECONDS (a token bucket of "
        "N refilled over SECONDS; a key may carry its own); 'off' for none. Fast-path "
        "answers count. Unauthenticated callers (--auth none) are not limited.",
    )
    max_streams: int = Field(
        4,
        ge=0,
        description="Answers one key or user may have running at once (0 = no cap); a key "
        "may carry its own.",
    )
    limits_timeout: float = Field(
        0.05,
        gt=0,
        description="Seconds a Redis limit check may take before --limits-on-redis-down decides.",
    )
    limits_on_redis_down: Literal["open", "closed"] = Field(
        "open",
        description="When Redis cannot answer a limit check: 'open' lets the request through "
        "(logged and counted), 'closed' answers 503.",
    )

    @field_validator("rate_limit")
    @classmethod
    def _rate_parses(cls, value: str) -> str:
        Rate.parse(value)
        return value.strip()
