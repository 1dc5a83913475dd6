"""The one typed settings object, composed of its groups (one module each).

Every field's description is its ``--help`` text; the CLI builds its flags from
these fields, group by group, so a setting cannot exist without a flag, an env
variable and help. Checks that read more than one group live here.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import field_validator, model_validator

from kefu.settings.access import AccessSettings
from kefu.settings.auth_mode import check_auth_settings
from kefu.settings.conversation import ConversationSettings
from kefu.settings.engine import EngineSettings
from kefu.settings.fast_path import FastPathSettings
from kefu.settings.group import SettingsGroup
from kefu.settings.limits import LimitSettings
from kefu.settings.pool import PoolSettings
from kefu.settings.server import ServerSettings
from kefu.settings.shared import SharedSettings
from kefu.settings.shop import ShopSettings
from kefu.settings.wechat import WeChatSettings

MAX_SEQUENCES = 256  # llama.cpp's LLAMA_MAX_SEQ


class Settings(
    ServerSettings,
    EngineSettings,
    PoolSettings,
    LimitSettings,
    ConversationSettings,
    FastPathSettings,
    ShopSettings,
    AccessSettings,
    SharedSettings,
    WeChatSettings,
):
    """Every setting of ``kefu serve``; each group's module says what its fields mean."""

    @model_validator(mode="after")
    def _sequence_ids_fit(self) -> Settings:
        if self.engine_kind == "llamacpp" and self.parallel + self.prefix_cache > MAX_SEQUENCES:
            raise ValueError(
                f"parallel + prefix_cache must be at most {MAX_SEQUENCES} (llama.cpp's "
                f"sequence limit), got {self.parallel} + {self.prefix_cache}"
            )
        return self

    @model_validator(mode="after")
    def _auth_fits_host(self) -> Settings:
        check_auth_settings(self)  # its ValueError names what is wrong
        return self

    @field_validator("engine", "engine_model", "engine_api_key", mode="before")
    @classmethod
    def _one_is_a_list(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @property
    def engine_kind(self) -> Literal["llamacpp", "fake", "remote"]:
        if self.engine == ("fake",):
            return "fake"
        if self.engine == ("llamacpp",) and self.engines_file is None:
            return "llamacpp"
        return "remote"


# The groups, in the order --help shows them: Settings' own bases, so they cannot drift.
GROUPS = cast(tuple[type[SettingsGroup], ...], Settings.__bases__)
