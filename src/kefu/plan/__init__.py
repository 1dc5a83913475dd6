"""``kefu plan``: the capacity planner.

From a model (a Hugging Face ``config.json``, a GGUF file or a built-in name) and a
customer-service traffic profile to memory, KV cache, concurrent sequences and the
cards needed of each type. The speeds are roofline estimates, scaled by stated
efficiencies or by a real ``kefu bench`` run (``--calibrate``). Touches no request path.
"""

from __future__ import annotations


class PlanError(ValueError):
    """Input the planner cannot use; the message is the one line the command prints."""
