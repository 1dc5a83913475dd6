"""Settings: defaults < TOML file < KEFU_* env < flags, and one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kefu import demo
from kefu.settings import (
    DEFAULT_PERSONA,
    GROUPS,
    Settings,
    SettingsError,
    env_name,
    load_settings,
)


def load(
    flags: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    config: Path | None = None,
) -> Settings:
    """load_settings isolated from the real environment."""
    return load_settings(flags, config_file=config, environ=env or {})


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kefu.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_env_name() -> None:
    assert env_name("context_size") == "KEFU_CONTEXT_SIZE"
    assert env_name("port") == "KEFU_PORT"


def test_defaults_without_any_source() -> None:
    settings = load()
    assert settings.host == "127.0.0.1"
    assert settings.port == 8000
    assert settings.engine == ("llamacpp",)
    assert settings.model is None
    assert settings.parallel == 8
    assert settings.warmup is True
    assert settings.persona == DEFAULT_PERSONA
    assert settings.threads >= 1
    # Neutral: no shop's name, order numbers or hours; the demo fills them in (kefu.demo).
    assert (settings.shop_name, settings.order_pattern, settings.order_example) == (None,) * 3
    assert settings.service_hours == "daily 00:00-24:00 UTC"
    assert settings.demo is None
    assert settings.order_backend == "sqlite"


def test_the_demo_fills_in_only_what_the_deployment_left_unset(tmp_path: Path) -> None:
    shop = demo.applied(load({"shop_name": "Acme", "data_dir": str(tmp_path)}))
    assert shop.shop_name == "Acme"
    assert (shop.order_pattern, shop.service_hours) == (demo.ORDER_PATTERN, demo.SERVICE_HOURS)
    assert demo.in_use(load({"data_dir": str(tmp_path)}))  # no knowledge base yet
    assert not demo.in_use(load({"data_dir": str(tmp_path), "demo": "false"}))
    assert not demo.in_use(load({"data_dir": str(tmp_path), "fast_path": "false"}))


def test_an_order_backend_must_be_registered() -> None:
    with pytest.raises(SettingsError, match=r"no kefu\.order_backends entry point is named 'erp'"):
        load({"order_backend": "erp"})
    assert load({"order_backend": "http", "order_api_url": "http://x/{order_id}"}).order_backend


def test_precedence_defaults_toml_env_flags(tmp_path: Path) -> None:
    config = write_toml(
        tmp_path,
        "port = 8001\nparallel = 2\nmax_tokens = 10\n",
    )
    env = {"KEFU_PARALLEL": "3", "KEFU_MAX_TOKENS": "20"}
    settings = load({"max_tokens": "30"}, env=env, config=config)
    assert settings.host == "127.0.0.1"  # default only
    assert settings.port == 8001  # TOML beats default
    assert settings.parallel == 3  # env beats TOML
    assert settings.max_tokens == 30  # flag beats env


@pytest.mark.parametrize(
    ("use_toml", "use_env", "use_flag", "expected"),
    [
        (False, False, False, 256),
        (True, False, False, 11),
        (True, True, False, 22),
        (False, True, False, 22),
        (True, True, True, 33),
        (True, False, True, 33),
    ],
)
def test_precedence_per_level(
    tmp_path: Path, use_toml: bool, use_env: bool, use_flag: bool, expected: int
) -> None:
    config = write_toml(tmp_path, "max_tokens = 11\n") if use_toml else None
    env = {"KEFU_MAX_TOKENS": "22"} if use_env else {}
    flags = {"max_tokens": 33} if use_flag else {}
    assert load(flags, env=env, config=config).max_tokens == expected


def test_flags_set_to_none_do_not_override(tmp_path: Path) -> None:
    settings = load({"port": None, "warmup": None}, env={"KEFU_PORT": "9001"})
    assert settings.port == 9001
    assert settings.warmup is True


def test_toml_keys_may_use_dashes(tmp_path: Path) -> None:
    config = write_toml(tmp_path, 'context-size = 512\nlog-level = "debug"\n')
    settings = load(config=config)
    assert settings.context_size == 512
    assert settings.log_level == "debug"


def test_a_removed_setting_in_the_config_file_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A config written for an earlier version still starts the server.
    config = write_toml(tmp_path, "embed-workers = 2\nport = 8124\n")
    settings = load(config=config)
    assert settings.port == 8124
    assert "'embed_workers' was removed" in caplog.text


def test_config_file_from_kefu_config_env(tmp_path: Path) -> None:
    config = write_toml(tmp_path, "port = 8123\n")
    settings = load(env={"KEFU_CONFIG": str(config)})
    assert settings.port == 8123


def test_unrelated_kefu_env_is_ignored() -> None:
    settings = load(env={"KEFU_NOT_A_SETTING": "x", "PORT": "1"})
    assert settings.port == 8000


@pytest.mark.parametrize(
    ("flags", "env", "field"),
    [
        ({"parallel": "0"}, {}, "parallel"),
        ({"parallel": 70000}, {}, "parallel"),
        ({}, {"KEFU_PORT": "70000"}, "port"),
        ({}, {"KEFU_PORT": "eighty"}, "port"),
        ({"engine": "gpu"}, {}, "engine"),
        ({}, {"KEFU_QUEUE_TIMEOUT": "0"}, "queue_timeout"),
        ({"context_size": "64"}, {}, "context_size"),
        ({"temperature": "2.5"}, {}, "temperature"),
        ({}, {"KEFU_LOG_LEVEL": "verbose"}, "log_level"),
        ({"max_body_bytes": "10"}, {}, "max_body_bytes"),
    ],
)
def test_invalid_value_names_flag_and_env(
    flags: dict[str, Any], env: dict[str, str], field: str
) -> None:
    with pytest.raises(SettingsError) as info:
        load(flags, env=env)
    message = str(info.value)
    flag = "--" + field.replace("_", "-")
    assert f"invalid setting {flag} ({env_name(field)}):" in message
    assert "\n" not in message
    assert "Value error" not in message


def test_several_invalid_values_on_one_line() -> None:
    with pytest.raises(SettingsError) as info:
        load({"parallel": "0", "port": "-1"})
    message = str(info.value)
    assert "\n" not in message
    assert "--parallel (KEFU_PARALLEL)" in message
    assert "--port (KEFU_PORT)" in message
    assert "; " in message


def test_order_example_must_match_the_order_pattern() -> None:
    with pytest.raises(SettingsError, match=r"set --order-pattern \(KEFU_ORDER_PATTERN\) too"):
        load({"order_example": "12345678"})
    assert load({"order_pattern": r"\b\d{8}\b"}).order_example is None
    with pytest.raises(SettingsError, match=r"set --order-example \(KEFU_ORDER_EXAMPLE\)"):
        load({"order_pattern": r"\b\d{8}\b", "order_example": "LH-100234"})
    with pytest.raises(SettingsError, match="order_example 'Order LH-100234' is not"):
        load({"order_pattern": demo.ORDER_PATTERN, "order_example": "Order LH-100234"})
    settings = load({"order_pattern": r"\b\d{8}\b", "order_example": "12345678"})
    assert settings.order_example == "12345678"


@pytest.mark.parametrize("name", ["", "Acme|", "|艾克美", "A|B|C"])
def test_a_shop_name_is_one_or_two_names(name: str) -> None:
    with pytest.raises(SettingsError, match="--shop-name"):
        load({"shop_name": name})


def test_settings_error_is_a_value_error() -> None:
    assert issubclass(SettingsError, ValueError)


def test_unknown_toml_key_rejected(tmp_path: Path) -> None:
    config = write_toml(tmp_path, 'colour = "blue"\n')
    with pytest.raises(SettingsError, match="unknown setting 'colour'") as info:
        load(config=config)
    assert "\n" not in str(info.value)


def test_invalid_toml_rejected(tmp_path: Path) -> None:
    config = write_toml(tmp_path, "port = = 1\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load(config=config)


def test_missing_config_file_rejected(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read config file"):
        load(config=tmp_path / "absent.toml")


def test_invalid_value_in_toml_names_the_setting(tmp_path: Path) -> None:
    config = write_toml(tmp_path, "history_turns = -1\n")
    with pytest.raises(SettingsError, match=r"--history-turns \(KEFU_HISTORY_TURNS\)"):
        load(config=config)


def test_persona_text_is_stripped() -> None:
    assert load({"persona": "  Be brief.  \n"}).persona == "Be brief."


def test_persona_read_from_file(tmp_path: Path) -> None:
    persona = tmp_path / "persona.txt"
    persona.write_text("\n  You sell teapots. 你好\n\n", encoding="utf-8")
    assert load({"persona": f"@{persona}"}).persona == "You sell teapots. 你好"
    assert load(env={"KEFU_PERSONA": f"@{persona}"}).persona == "You sell teapots. 你好"


def test_persona_file_from_toml(tmp_path: Path) -> None:
    persona = tmp_path / "persona.txt"
    persona.write_text("From TOML.", encoding="utf-8")
    config = write_toml(tmp_path, f'persona = "@{persona.as_posix()}"\n')
    assert load(config=config).persona == "From TOML."


def test_missing_persona_file_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(SettingsError) as info:
        load({"persona": f"@{missing}"})
    message = str(info.value)
    assert "--persona (KEFU_PERSONA)" in message
    assert "cannot read persona file" in message
    assert str(missing) in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_persona_rejected(tmp_path: Path, text: str) -> None:
    with pytest.raises(SettingsError, match="persona is empty"):
        load({"persona": text})
    persona = tmp_path / "empty.txt"
    persona.write_text(text, encoding="utf-8")
    with pytest.raises(SettingsError, match="persona is empty"):
        load({"persona": f"@{persona}"})


def test_model_must_exist(tmp_path: Path) -> None:
    missing = tmp_path / "model.gguf"
    with pytest.raises(SettingsError) as info:
        load({"model": str(missing)})
    message = str(info.value)
    assert "--model (KEFU_MODEL)" in message
    assert "no model file" in message
    assert "\n" not in message


def test_model_existing_file_accepted(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert load(env={"KEFU_MODEL": str(model)}).model == model


def test_model_that_is_not_gguf_rejected_at_start(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_text("<html>a download error page</html>")
    with pytest.raises(SettingsError, match="is not a GGUF model file"):
        load({"model": str(model)})


def test_model_directory_rejected(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="no model file"):
        load({"model": str(tmp_path)})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("false", False), ("0", False), ("no", False), ("off", False), ("true", True), ("1", True)],
)
def test_bool_env_parsing(raw: str, expected: bool) -> None:
    assert load(env={"KEFU_WARMUP": raw}).warmup is expected


def test_bool_env_garbage_rejected() -> None:
    with pytest.raises(SettingsError, match=r"--warmup \(KEFU_WARMUP\)"):
        load(env={"KEFU_WARMUP": "maybe"})


def test_bool_flag_overrides_env() -> None:
    assert load({"warmup": True}, env={"KEFU_WARMUP": "false"}).warmup is True


def test_env_strings_are_coerced() -> None:
    settings = load(
        env={"KEFU_QUEUE_TIMEOUT": "2.5", "KEFU_DATA_DIR": "/tmp/x", "KEFU_ENGINE": "fake"}
    )
    assert settings.queue_timeout == 2.5
    assert settings.data_dir == Path("/tmp/x")
    assert settings.engine == ("fake",)


def test_settings_are_frozen() -> None:
    settings = load()
    with pytest.raises(ValueError, match="frozen"):
        settings.port = 1


def test_llamacpp_sequences_are_bounded_but_a_pool_may_run_more() -> None:
    with pytest.raises(SettingsError, match="parallel"):
        load({"parallel": 300})
    pool = load({"parallel": 300, "engine": ["http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1"]})
    assert pool.engine_kind == "remote"
    assert pool.parallel == 300


def test_every_setting_belongs_to_exactly_one_group() -> None:
    grouped = [name for group in GROUPS for name in group.model_fields]
    assert len(grouped) == len(set(grouped))
    assert set(grouped) == set(Settings.model_fields)
