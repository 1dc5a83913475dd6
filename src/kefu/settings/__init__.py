"""The one typed settings object (``Settings``, composed of one group per area) and
where its values come from (``load_settings``)."""

from kefu.settings.conversation import DEFAULT_PERSONA
from kefu.settings.loading import (
    ENV_PREFIX,
    LIST_SEPARATOR,
    SettingsError,
    env_name,
    is_list_field,
    load_settings,
)
from kefu.settings.model import GROUPS, MAX_SEQUENCES, Settings

__all__ = [
    "DEFAULT_PERSONA",
    "ENV_PREFIX",
    "GROUPS",
    "LIST_SEPARATOR",
    "MAX_SEQUENCES",
    "Settings",
    "SettingsError",
    "env_name",
    "is_list_field",
    "load_settings",
]
