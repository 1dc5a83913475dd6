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
    demo: bool | None = Field(
        None,
        description="The demo shop (a fictional home-goods shop, English and Chinese): its "
        "knowledge base, its sample orders in a new SQLite order table, and its name, "
        "order numbers and hours where the shop settings are unset. --demo: always; "
        "--no-demo: never; unset: while the knowledge base holds nothing but the demo.",
    )
    second_look: bool = Field(
        True,
        description="Before a question the fast path declined goes to the LLM, let "
        "multilingual-e5-small read it (one to three passes of about 17 ms, off the event "
        "loop) and answer from the knowledge base when it is sure.",
    )
    faq_precision: float = Field(
        0.95,
        gt=0,
        lt=1,
        description="Serve a knowledge-base answer verbatim only where the decision "
        "estimates it right at a threshold whose precision this knowledge base's labels "
        "bound from below at this value (Clopper-Pearson, 95 percent confidence; its own "
        "phrasings held out, reviewed misses, a judge's verdicts on traffic), fitted in "
        "the background; where the labels are too few, the shipped prior's conservative "
        "threshold. Otherwise the LLM answers with the passages.",
    )
    judge_engine: str | None = Field(
        None,
        description="An OpenAI-compatible engine (base URL, e.g. http://gpu-host:8000/v1) "
        "able to judge whether a knowledge-base answer answers a message: after the reply, "
        "in the background, it labels messages the LLM answered with an entry among its "
        "passages, and a share of those the fast path served (falling as the entry's "
        "verdicts grow); the labels refit the decision. Unset: no judge.",
    )
    judge_with_engine: bool = Field(
        False,
        description="Judge with the serving engine (the operator says it is able to): the "
        "same background labelling as --judge-engine, on the engine that answers.",
    )
    judge_error: float = Field(
        0.0,
        ge=0,
        lt=0.5,
        description="How often, at least, the judge's verdicts are wrong: the precision its "
        "labels bound is corrected for it. Before using a judge the server asks it the "
        "knowledge base's own questions with their answer and with another's, and takes "
        "out the larger of this and the lower bound of its error there (a judge wrong on a "
        "quarter of them is not used). Taking out more error than it makes would overstate "
        "the precision, so 0 is the safe default.",
    )
    judge_model: str | None = Field(
        None, description="The model name sent to --judge-engine (default: the first it lists)."
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
