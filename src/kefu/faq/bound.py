"""How sure a count of right answers makes us of a precision: the Clopper-Pearson lower
(and upper) bound, the exact one-sided bound of a binomial proportion (no normal
approximation: the counts that matter are small, and a near-perfect one is where the
approximation fails).

Plain Python: the regularised incomplete beta function by its continued fraction
(Lentz's method), inverted by bisection; a few microseconds a bound.
"""

from __future__ import annotations

import math

CONFIDENCE = 0.95
_TINY = 1e-300
_STEPS = 300


def precision_lower_bound(right: int, served: int, confidence: float = CONFIDENCE) -> float:
    """The precision that ``right`` of ``served`` rules out below, at ``confidence``:
    the p where seeing ``right`` or more right of ``served`` has probability 1 - confidence."""
    if not 0 <= right <= served:
        raise ValueError(f"{right} right of {served} served")
    if right == 0:
        return 0.0
    alpha = 1.0 - confidence
    if right == served:
        return float(alpha ** (1.0 / served))
    low, high = 0.0, right / served
    for _ in range(60):  # P(X >= right | p) = I_p(right, served - right + 1) rises with p
        middle = (low + high) / 2
        if _regularised_beta(right, served - right + 1, middle) < alpha:
            low = middle
        else:
            high = middle
    return low


def precision_upper_bound(right: int, served: int, confidence: float = CONFIDENCE) -> float:
    """The precision that ``right`` of ``served`` rules out above, at ``confidence``."""
    if not 0 <= right <= served:
        raise ValueError(f"{right} right of {served} served")
    return 1.0 - precision_lower_bound(served - right, served, confidence)


def needed(target: float, confidence: float = CONFIDENCE) -> int:
    """The fewest labels, all right, whose bound reaches ``target``."""
    return math.ceil(math.log(1.0 - confidence) / math.log(target))


def _regularised_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _fraction(a, b, x) / a
    return 1.0 - front * _fraction(b, a, 1.0 - x) / b


def _fraction(a: float, b: float, x: float) -> float:
    """The incomplete beta function's continued fraction (modified Lentz)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _STEPS):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h
