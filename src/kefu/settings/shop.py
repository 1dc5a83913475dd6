"""Settings of the shop: its name, its order numbers and their lookup, its hours."""

from __future__ import annotations

import re
from typing import ClassVar, Self

from pydantic import Field, field_validator, model_validator

from kefu import plugins
from kefu.fastpath.hours import ServiceHours
from kefu.settings.group import SettingsGroup
from kefu.text.order_numbers import example_fits


class ShopSettings(SettingsGroup):
    """The shop: its name, its order numbers and where orders are looked up, its hours."""

    heading: ClassVar[str] = "the shop"

    order_backend: str = Field(
        "sqlite",
        description="Where order_status looks orders up: 'sqlite' (a table in the data "
        "dir, with the demo's sample orders while the demo is in use), 'http' (the shop's "
        "API, --order-api-url), or the name a package registers under the "
        "kefu.order_backends entry points.",
    )
    order_api_url: str | None = Field(
        None,
        description="--order-backend http: URL template of the shop's order API, with "
        "{order_id}, e.g. https://shop.example/api/orders/{order_id}.",
    )
    order_pattern: str | None = Field(
        None,
        description="Regular expression of an order number in a message (case-insensitive), "
        "e.g. '\\bAC-?\\d{6}\\b'. Unset: no order numbers are read and the order_status "
        "tool is off.",
    )
    shop_name: str | None = Field(
        None,
        description="The shop's name in the fast path's templated replies (greeting, who am "
        "I, goodbye) and on the chat page and widget: 'Acme', or 'Acme|艾克美' with a "
        "Chinese name for Chinese replies and pages. Unset: the replies name no shop.",
    )
    order_example: str | None = Field(
        None,
        description="An order number as customers see it: replies show it as the shape to "
        "look for; when it starts with two or more letters, a number with them that "
        "--order-pattern does not take (AC-10023) is pointed out as mistyped, and one "
        "typed with a space (AC 100234) is read. --order-pattern must take it whole: set "
        "the two together.",
    )
    service_hours: str = Field(
        "daily 00:00-24:00 UTC",
        description="When human agents work, as 'DAYS HH:MM-HH:MM UTC-OFFSET', e.g. "
        "'Mon-Fri 08:30-17:30 -05:00'; the handoff reply tells customers outside these "
        "hours when a human will answer.",
    )

    @field_validator("order_backend")
    @classmethod
    def _backend_registered(cls, value: str) -> str:
        known = plugins.names(plugins.ORDER_BACKENDS)
        if value not in known:
            raise ValueError(str(plugins.UnknownPart(plugins.ORDER_BACKENDS, value, known)))
        return value

    @model_validator(mode="after")
    def _order_api_needs_url(self) -> Self:
        if self.order_backend == "http" and not self.order_api_url:
            raise ValueError("order_backend 'http' needs --order-api-url (KEFU_ORDER_API_URL)")
        if self.order_api_url is not None and "{order_id}" not in self.order_api_url:
            raise ValueError("order_api_url must contain {order_id}")
        return self

    @model_validator(mode="after")
    def _order_example_matches(self) -> Self:
        if self.order_example is None:
            return self
        if self.order_pattern is None:
            raise ValueError(
                "order_example needs the order_pattern it is an example of: set "
                "--order-pattern (KEFU_ORDER_PATTERN) too"
            )
        if not example_fits(self.order_example, self.order_pattern):
            raise ValueError(
                f"order_example '{self.order_example}' is not what order_pattern "
                f"'{self.order_pattern}' takes: set --order-example (KEFU_ORDER_EXAMPLE) to "
                "one of your order numbers, which replies show customers as its shape"
            )
        return self

    @field_validator("shop_name")
    @classmethod
    def _shop_named(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not all(part.strip() for part in value.split("|")) or value.count("|") > 1:
            raise ValueError("give the shop's name, or 'English name|Chinese name'")
        return value.strip()

    @field_validator("order_pattern")
    @classmethod
    def _pattern_compiles(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @field_validator("service_hours")
    @classmethod
    def _hours_parse(cls, value: str) -> str:
        ServiceHours.parse(value)  # its ValueError names what is wrong
        return value
