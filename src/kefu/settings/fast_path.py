"""Settings of the fast path: the knowledge base's decision and the answer cache."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from kefu.settings.group import SettingsGroup


class FastPathSettings(SettingsGroup):
    """The fast path: the knowledge base, its decision and the answer cache."""

    heading: ClassVar[str] = "fast path"

    fast_path: bool = Field(
        True,
        description="Answer from the answer cache, the knowledge base and templated tools "
        "before the LLM (false: every /chat message goes to the LLM).",
    )
    demo_kb: bool = Field(
        True,
        description="Load the bundled demo knowledge base (a fictional shop, English and "
        "Chinese) when the knowledge base is empty, and its sample orders into a new "
        "SQLite order table.",
    )
    faq_threshold: float = Field(
        0.45,
        ge=0,
        le=1,
        description="Fused retrieval score a knowledge-base answer needs to be served verbatim "
        "for a message without Chinese; below it the message goes to the LLM with the best "
        "passages. The FAQ guard's checks apply at any score.",
    )
    faq_threshold_zh: float = Field(
        0.28,
        ge=0,
        le=1,
        description="The same for a message with Chinese, whose paraphrases score lower "
        "(fewer words, each weighing more).",
    )
    faq_margin: float = Field(
        0.03,
        ge=0,
        le=1,
        description="Lead the best knowledge-base answer needs over the runner-up; closer "
        "means ambiguous, and the LLM answers with both in its context.",
    )
    second_look: bool = Field(
        True,
        description="Before a question the fast path declined goes to the LLM, let "
        "multilingual-e5-small read it (one to three passes of about 17 ms, off the event "
        "loop) and answer from the knowledge base when it is sure.",
    )
    second_look_margin: float = Field(
        0.02,
        ge=0,
        le=1,
        description="Lead, in e5 cosine similarity, the second look's best answer needs "
        "over the next answer's best question.",
    )
    # The calibrated fast path (issue 24): the precision it keeps.
    faq_precision: float = Field(
        0.95,
        gt=0,
        lt=1,
        description="Serve a knowledge-base answer verbatim only where the calibrated "
        "decision (a prior fitted on customers' wording of other knowledge bases, measured "
        "on this one's probes at start and after every change, in the background; `kefu kb "
        "calibrate`) estimates it right with at least this probability; otherwise the LLM "
        "answers with the passages. Until the first calibration of a data dir, the fixed "
        "threshold and margin decide.",
    )
    faq_calibration: bool = Field(
        True,
        description="Fit the fast path's decision to the knowledge base and keep the "
        "precision asked for (false: the fixed threshold and margin decide, as before the "
        "first calibration).",
    )
    kb_passages: int = Field(
        3,
        ge=0,
        le=10,
        description="Knowledge-base passages put in the LLM's context: the best hit of each "
        "answer, so phrasings of one answer take one place.",
    )
    answer_cache: bool = Field(
        True, description="Serve and store LLM answers to repeated general questions."
    )
    cache_threshold: float = Field(
        0.06,
        ge=0,
        le=2,
        description="Largest cosine distance at which a cached answer is served for a "
        "differently worded question (pick it with `kefu cache tune`); 0 = exact matches only.",
    )
    cache_ttl: float = Field(
        86400.0, gt=0, description="Seconds a cached answer is served before it expires."
    )
