"""The kefu command: flags generated from Settings, one-line errors, exit codes.

No test starts a server: the valid-settings path replaces ``kefu.cli.serve``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kefu import __version__, cli
from kefu.settings import Settings, env_name


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's KEFU_* variables out of these tests; fix help formatting."""
    for name in list(os.environ):
        if name.startswith("KEFU_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    calls: list[Settings] = []
    monkeypatch.setattr(cli, "serve", calls.append)
    return calls


def serve_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["serve", "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_setting_with_its_env_var(capsys: pytest.CaptureFixture[str]) -> None:
    out = serve_help(capsys)
    flat = " ".join(out.split())
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        assert flag in out, flag
        assert env_name(name) in out, env_name(name)
        assert field.description is not None
        assert " ".join(field.description.split()) in flat, name
    assert "--no-warmup" in out
    assert "--config" in out
    assert "KEFU_CONFIG" in out


def test_top_level_help_names_serve(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["--help"])
    assert info.value.code == 0
    assert "serve" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"kefu {__version__}"


def test_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
    assert "required" in capsys.readouterr().err


def test_invalid_flag_value_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], served: list[Settings]
) -> None:
    assert cli.main(["serve", "--parallel", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("kefu: error: ")
    assert "--parallel (KEFU_PARALLEL)" in lines[0]
    assert served == []


def test_invalid_env_value_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, served: list[Settings]
) -> None:
    monkeypatch.setenv("KEFU_PORT", "not-a-port")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "--port (KEFU_PORT)" in err
    assert len(err.splitlines()) == 1
    assert served == []


def test_unknown_config_key_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], served: list[Settings]
) -> None:
    config = tmp_path / "kefu.toml"
    config.write_text("nope = 1\n", encoding="utf-8")
    assert cli.main(["serve", "--config", str(config)]) == 2
    assert "unknown setting 'nope'" in capsys.readouterr().err
    assert served == []


def test_valid_flags_reach_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[Settings]
) -> None:
    config = tmp_path / "kefu.toml"
    config.write_text("port = 9100\nmax_tokens = 7\nhistory_turns = 1\n", encoding="utf-8")
    monkeypatch.setenv("KEFU_MAX_TOKENS", "8")
    monkeypatch.setenv("KEFU_WARMUP", "true")
    code = cli.main(
        [
            "serve",
            "--config",
            str(config),
            "--engine",
            "fake",
            "--parallel",
            "4",
            "--no-warmup",
            "--data-dir",
            str(tmp_path / "data"),
        ]
    )
    assert code == 0
    assert len(served) == 1
    settings = served[0]
    assert settings.engine == ("fake",)
    assert settings.parallel == 4  # flag
    assert settings.warmup is False  # flag beats env
    assert settings.max_tokens == 8  # env beats TOML
    assert settings.port == 9100  # TOML beats default
    assert settings.history_turns == 1
    assert settings.data_dir == tmp_path / "data"
    assert settings.host == "127.0.0.1"  # default


def test_flag_overrides_invalid_env(
    monkeypatch: pytest.MonkeyPatch, served: list[Settings]
) -> None:
    monkeypatch.setenv("KEFU_PARALLEL", "0")
    assert cli.main(["serve", "--engine", "fake", "--parallel", "2"]) == 0
    assert served[0].parallel == 2
