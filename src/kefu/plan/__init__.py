"""``kefu plan``: the capacity planner.

From a model (a Hugging Face ``config.json``, a GGUF file or a built-in name) and a
customer-service traffic profile to memory, KV cache, concurrent sequences and the
cards needed of each type. The speeds are roofline estimates, scaled by stated
efficiencies or by a real ``kefu bench`` run (``--calibrate``). Touches no request path.
"""

from __future__ import annotations

from collections.abc import Callable


class PlanError(ValueError):
    """Input the planner cannot use; the message is the one line the command prints."""


def named_number(
    value: str, flag: str, usage: str, valid: Callable[[float], bool]
) -> tuple[str, float]:
    """``NAME=NUMBER`` from a repeated flag (``--split``, ``--rent``), the name before the
    last ``=``; PlanError with ``usage`` where it is not one or ``valid`` rejects it."""
    name, sep, number_text = value.rpartition("=")
    try:
        number = float(number_text)
    except ValueError:
        number = float("nan")
    if not sep or not name or number != number or not valid(number):
        raise PlanError(f"{flag} {value!r}: expected {usage}")
    return name, number
