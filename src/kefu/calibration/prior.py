"""The decision's weights: a domain-general prior fitted on customers' wording.

The probes a shop's entries make do not look like its customers' messages (a reworded
question keeps the question's words; a customer names what is in front of them), so a
decision fitted on them alone promised 95 % and kept 71-100 % with a tenth of the
coverage it expected. The weights here were fitted instead on labelled customer
wording: the messages (tuning sets, written from each ``kb.csv`` alone) of nine
knowledge bases unrelated to the demo, in nine domains and two languages
(``benchmarks/data/kbs/``: telecom_en, bank_zh, saas_en, airline_zh, insurance_en,
hotel_zh, pharmacy_en, edu_zh, energy_en; each imported with one and with ten questions
per answer), by ``benchmarks/calibration_prior.py --write``, each weight kept to the
sign its feature's meaning allows (``Logistic.fit``). Nothing of a particular shop is in
them: they weigh retrieval scores, leads, the e5 reading of the answer and the FAQ
guard's findings, which mean the same on any knowledge base.

The file also carries what the prior kept where it was not fitted: leave one knowledge
base out (fit on eight, serve the ninth's messages), at each promised precision of the
curve, pooled over the nine. That is the decision's expectation on a new shop's
customers, as opposed to its probes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kefu.calibration.model import Logistic, logistic

PRIOR_FILE = Path(__file__).parent / "static" / "prior.json"


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """What the prior kept on a knowledge base it was not fitted on, at one target."""

    target: float
    precision: float
    coverage: float
    served: int


@dataclass(frozen=True, slots=True)
class Prior:
    first: Logistic
    second: Logistic
    fitted_on: str
    elsewhere: tuple[Elsewhere, ...]

    def measured_elsewhere(self, target: float) -> Elsewhere | None:
        for point in self.elsewhere:
            if abs(point.target - target) < 1e-9:
                return point
        return None


@cache
def load_prior(path: Path = PRIOR_FILE) -> Prior:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return Prior(
        first=logistic(raw["first"]),
        second=logistic(raw["second"]),
        fitted_on=raw["fitted_on"],
        elsewhere=tuple(Elsewhere(**point) for point in raw["elsewhere"]),
    )
