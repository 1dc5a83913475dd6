"""The docs stay true: the README opens with the two commands CI runs, and the
configuration reference is what the settings say."""

from __future__ import annotations

from pathlib import Path

from kefu.settings import Settings, env_name
from kefu.settings.reference import flag, markdown

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "configuration.md"


def test_the_configuration_reference_is_written_from_the_settings() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == markdown(), (
        "docs/configuration.md is stale: run scripts/settings-doc"
    )


def test_the_reference_names_every_setting_with_its_flag_and_env() -> None:
    text = markdown()
    missing = [
        name
        for name in Settings.model_fields
        if f"`{flag(name)}`" not in text or f"`{env_name(name)}`" not in text
    ]
    assert not missing


def test_the_readme_points_to_the_reference() -> None:
    assert "docs/configuration.md" in README.read_text(encoding="utf-8")


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text(encoding="utf-8").splitlines()[:12]
    assert any("pip install" in line and "kefu serve" in line for line in head)
    assert any(line.strip() == "scripts/test" for line in head)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == "scripts/test"
