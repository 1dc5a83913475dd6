"""What every group of settings shares: one frozen, strict model, so the composed
``Settings`` and each group refuse unknown names alike."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class SettingsGroup(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    # The heading of the group's flags in ``kefu serve --help``.
    heading: ClassVar[str] = "settings"
