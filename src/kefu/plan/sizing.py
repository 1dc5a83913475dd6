"""From demand to replicas: the load a replica is under, what it can carry, how many.

Continuous batching on one replica at a given arrival rate (turns/s): prefills take a
share u = rate x prefill time of the device; decode steps run in the rest, so a token
takes step(B) / (1 - u); a new turn waits for the prefills ahead of it (an M/D/1 queue:
u / (2 (1 - u)) x prefill) and for the step in progress. The sequences in flight B =
rate x E2E (Little's law), and the step time depends on B: the two are solved together.
A closed loop of chats adds rate = chats / (E2E + think). The latencies are means, not
p99: the headroom is what covers the tail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kefu.bench.slo import Slo
from kefu.plan.memory import MemoryPlan
from kefu.plan.speed import Speed
from kefu.plan.traffic import Traffic

_LARGEST = 1e7  # sequences or demand per replica: beyond this nothing converges usefully
_TOLERANCE = 1e-7


@dataclass(frozen=True, slots=True)
class Load:
    """One replica's steady state at a demand."""

    turns_per_s: float
    sequences: float  # in flight: prefilling or decoding
    prefill_s: float
    prefill_share: float  # u
    ttft_s: float
    tpot_s: float

    def e2e_s(self, tokens_out: float) -> float:
        return self.ttft_s + (tokens_out - 1) * self.tpot_s


def _smallest_root(gap: Callable[[float], float]) -> float | None:
    """The smallest B >= 0 where gap(B) = 0, gap(0) > 0; None if gap stays positive.

    Newton's steps from the left, kept inside a bracket by bisection: gap is convex
    piecewise linear for dense models (a few steps) and close to it for MoE."""
    low, high = 0.0, math.inf
    b = 0.0
    for _ in range(200):
        g = gap(b)
        if abs(g) <= _TOLERANCE * max(b, 1.0):
            return b
        if g > 0:
            low = b
        else:
            high = b
        h = 1e-6 * max(b, 1.0)
        slope = (gap(b + h) - g) / h
        candidate = b - g / slope if slope < 0 else math.inf
        if not low < candidate < high:
            candidate = 2 * low + 1 if math.isinf(high) else (low + high) / 2
        if candidate > _LARGEST:
            return None
        b = candidate
    return b if high - low <= 1e-6 * max(high, 1.0) else None


def load_at_rate(speed: Speed, prompt: float, out: float, rate: float) -> Load | None:
    """The steady state at ``rate`` turns/s of ``prompt`` tokens in and ``out`` out, or
    None when the replica cannot keep up."""
    context = prompt + out / 2  # a sequence's average length while it decodes
    prefill = speed.prefill(prompt)
    share = rate * prefill
    if share >= 1:
        return None
    wait = share / (2 * (1 - share)) * prefill

    def latencies(sequences: float) -> tuple[float, float]:
        step = speed.decode_step(sequences, context)
        return prefill + step + wait, step / (1 - share)

    def gap(sequences: float) -> float:
        ttft, tpot = latencies(sequences)
        return rate * (ttft + (out - 1) * tpot) - sequences

    sequences = _smallest_root(gap)
    if sequences is None:
        return None  # decode alone needs all of the device or more: no steady state
    ttft, tpot = latencies(sequences)
    return Load(rate, sequences, prefill, share, ttft, tpot)


def load_at(speed: Speed, traffic: Traffic, demand: float) -> Load | None:
    """The steady state at ``demand`` (turns/s, or chats in a closed loop)."""
    if not traffic.closed_loop:
        return load_at_rate(speed, traffic.tokens_in, traffic.tokens_out, demand)
    # rate x (E2E(rate) + think) grows with rate: bisect for it to equal the chats.
    prompt, out, think = traffic.tokens_in, traffic.tokens_out, traffic.think_s

    def chats(load: Load | None) -> float:
        return math.inf if load is None else load.turns_per_s * (load.e2e_s(out) + think)

    low, high = 0.0, demand / max(think, 1e-9)
    found = None
    for _ in range(100):
        rate = (low + high) / 2
        load = load_at_rate(speed, prompt, out, rate)
        if chats(load) > demand:
            high = rate
        else:
            low, found = rate, load
        if high - low <= 1e-6 * high:
            break
    if found is None or chats(found) < demand * 0.999:
        return None  # the chats would queue without bound
    return found


def misses(load: Load, traffic: Traffic, slo: Slo) -> str | None:
    """The first SLO bound ``load`` misses, or None."""
    measured = {"ttft": load.ttft_s, "tpot": load.tpot_s, "e2e": load.e2e_s(traffic.tokens_out)}
    return next((m for m, bound in slo.bounds().items() if measured[m] > bound), None)


def meets(load: Load | None, memory: MemoryPlan, traffic: Traffic, slo: Slo) -> bool:
    return (
        load is not None
        and load.sequences <= memory.sequences
        and misses(load, traffic, slo) is None
    )


@dataclass(frozen=True, slots=True)
class Capacity:
    """The most demand one replica carries within the SLO, and why not more."""

    demand: float  # 0: not even one turn alone meets the SLO
    limit: str  # what binds: TTFT, TPOT, E2E, KV memory, throughput


def _limit(load: Load | None, memory: MemoryPlan, traffic: Traffic, slo: Slo) -> str:
    if load is None:
        return "throughput"
    if load.sequences > memory.sequences:
        return "KV memory"
    return (misses(load, traffic, slo) or "none").upper()


def capacity(speed: Speed, memory: MemoryPlan, traffic: Traffic, slo: Slo) -> Capacity:
    """Largest demand meeting the SLO, by doubling then bisection (load grows with it)."""
    tiny = 1e-6
    if not meets(load_at(speed, traffic, tiny), memory, traffic, slo):
        return Capacity(0.0, _limit(load_at(speed, traffic, tiny), memory, traffic, slo))
    low, high = tiny, 2 * tiny
    while high < _LARGEST and meets(load_at(speed, traffic, high), memory, traffic, slo):
        low, high = high, 2 * high
    while high - low > 1e-3 * low:
        middle = (low + high) / 2
        if meets(load_at(speed, traffic, middle), memory, traffic, slo):
            low = middle
        else:
            high = middle
    return Capacity(low, _limit(load_at(speed, traffic, high), memory, traffic, slo))


def replicas_needed(demand: float, capacity: Capacity) -> int | None:
    """Replicas that share ``demand`` evenly within the SLO; None if no number does."""
    if capacity.demand <= 0:
        return None
    return max(1, math.ceil(demand / capacity.demand - 1e-9))
