"""The README's configuration table stays true: every setting is documented with its env name."""

from __future__ import annotations

from pathlib import Path

from kefu.settings import Settings, env_name

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_in_the_readme_table() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [
        name
        for name in Settings.model_fields
        if f"`--{name.replace('_', '-')}`" not in text or f"`{env_name(name)}`" not in text
    ]
    assert not missing, f"README.md lacks settings: {missing}"


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text(encoding="utf-8").splitlines()[:12]
    assert any("pip install" in line and "kefu serve" in line for line in head)
    assert any(line.strip() == "scripts/test" for line in head)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == "scripts/test"
