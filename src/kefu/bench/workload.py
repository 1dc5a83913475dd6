"""Simulated customers: sessions of several turns with think time, from a message pool.

Each message is, independently: an order-status question with probability ``order_share``;
else one of the pool's FAQs with probability ``repeat_share`` (both shares of *all*
messages), chosen by Zipf's law over popularity rank (weight 1 / rank ** zipf_s), so the
same few questions repeat across customers as they do at a real help desk; else a unique
message, which no other message of the run repeats.

A session is a pure function of (seed, session index): the same seed gives the same
customers in any run, whatever the order in which the load generator starts them.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kefu.bench.pools import BUILTIN

Kind = Literal["faq", "unique", "order"]
KINDS: tuple[Kind, ...] = ("faq", "unique", "order")
MAX_TURNS = 50  # unique numbers leave room for this many turns per session
THINK_CAP = 10  # an exponential think time is cut at this many means, to keep runs bounded


class WorkloadError(ValueError):
    """A workload setting or pool file that cannot be used; the message names it."""


@dataclass(frozen=True)
class Message:
    text: str
    kind: Kind
    rank: int | None = None  # an FAQ's popularity rank, 1 = most asked


@dataclass(frozen=True)
class Pool:
    name: str
    faqs: tuple[str, ...]  # most popular first
    unique: tuple[str, ...]  # templates: {n} becomes a number unique in the run
    orders: tuple[str, ...]  # templates: {order} becomes an order number


@dataclass(frozen=True)
class Turns:
    """Turns per session: uniform over lo..hi."""

    lo: int
    hi: int

    def __str__(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


@dataclass(frozen=True)
class Think:
    """Seconds a customer waits between turns: none, exponential with a mean, or uniform."""

    lo: float
    hi: float
    exponential: bool

    def sample(self, rng: random.Random) -> float:
        if self.exponential:
            return 0.0 if self.hi == 0 else min(rng.expovariate(1 / self.hi), THINK_CAP * self.hi)
        return rng.uniform(self.lo, self.hi)

    def __str__(self) -> str:
        if self.hi == 0:
            return "none"
        if self.exponential:
            return f"{self.hi:g} s (exponential mean)"
        return f"{self.lo:g}-{self.hi:g} s (uniform)"


@dataclass(frozen=True)
class Session:
    index: int
    messages: tuple[Message, ...]
    think: tuple[float, ...]  # seconds before each turn after the first


def parse_turns(text: str) -> Turns:
    """'3' (always 3) or '1-4' (uniform)."""
    lo_text, sep, hi_text = text.partition("-")
    try:
        lo = int(lo_text)
        hi = int(hi_text) if sep else lo
    except ValueError:
        raise WorkloadError(f"--turns {text!r}: use N or A-B, e.g. 3 or 1-4") from None
    if not 1 <= lo <= hi <= MAX_TURNS:
        raise WorkloadError(f"--turns {text!r}: need 1 <= A <= B <= {MAX_TURNS}")
    return Turns(lo, hi)


def parse_think(text: str) -> Think:
    """'0' (none), '2' (exponential, mean 2 s) or '1-3' (uniform seconds)."""
    lo_text, sep, hi_text = text.partition("-")
    try:
        lo = float(lo_text)
        hi = float(hi_text) if sep else lo
    except ValueError:
        raise WorkloadError(f"--think {text!r}: use SECONDS or A-B, e.g. 1 or 0.5-2") from None
    if not 0 <= lo <= hi < 3600:
        raise WorkloadError(f"--think {text!r}: need 0 <= A <= B < 3600 seconds")
    return Think(0.0 if not sep else lo, hi, exponential=not sep)


def builtin_pool(name: str) -> Pool:
    faqs, unique, orders = BUILTIN[name]
    return Pool(name, faqs, unique, orders)


def load_pool(path: Path) -> Pool:
    """A JSONL file: one object a line, ``{"text": "...", "kind": "faq"}``.

    ``kind`` is faq (the default; list them most popular first), unique (a template, {n}
    becomes a number unique in the run; one without {n} gets " #<n>" appended so it stays
    unique) or order ({order} becomes an order number; appended when missing). Blank lines
    are skipped. Errors name the file and line.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WorkloadError(f"cannot read pool {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise WorkloadError(f"pool {path} is not UTF-8 text") from None
    found: dict[Kind, list[str]] = {kind: [] for kind in KINDS}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise WorkloadError(f'{where}: expected an object like {{"text": "..."}}')
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise WorkloadError(f"{where}: 'text' must be a non-empty string")
        kind = item.get("kind", "faq")
        if kind not in KINDS:
            raise WorkloadError(f"{where}: unknown kind {kind!r}; use faq, unique or order")
        text = text.strip()
        if kind == "unique" and "{n}" not in text:
            text += " #{n}"
        if kind == "order" and "{order}" not in text:
            text += " (order {order})"
        found[kind].append(text)
    if not any(found.values()):
        raise WorkloadError(f"pool {path} has no messages")
    return Pool(path.name, tuple(found["faq"]), tuple(found["unique"]), tuple(found["order"]))


@dataclass(frozen=True)
class WorkloadSpec:
    pool: Pool
    turns: Turns = Turns(1, 4)
    think: Think = Think(0.0, 1.0, exponential=True)
    repeat_share: float = 0.5
    order_share: float = 0.1
    zipf_s: float = 1.0
    seed: int = 0

    def check(self) -> None:
        """Raise WorkloadError if the shares or the pool cannot give the messages asked for."""
        for name, share in (
            ("--repeat-share", self.repeat_share),
            ("--order-share", self.order_share),
        ):
            if not 0 <= share <= 1:
                raise WorkloadError(f"{name} must be between 0 and 1, got {share:g}")
        if self.repeat_share + self.order_share > 1 + 1e-9:
            raise WorkloadError("--repeat-share + --order-share must be at most 1")
        if self.zipf_s < 0:
            raise WorkloadError(f"--zipf must be at least 0, got {self.zipf_s:g}")
        unique_share = 1 - self.repeat_share - self.order_share
        for share, items, kind in (
            (self.repeat_share, self.pool.faqs, "faq"),
            (self.order_share, self.pool.orders, "order"),
            (unique_share, self.pool.unique, "unique"),
        ):
            if share > 1e-9 and not items:
                raise WorkloadError(
                    f"pool {self.pool.name} has no {kind} messages, but the "
                    f"shares ask for {share:.0%} of them"
                )


class Workload:
    """Sessions by index, from a checked WorkloadSpec."""

    def __init__(self, spec: WorkloadSpec) -> None:
        spec.check()
        self.spec = spec
        weights = [1 / rank**spec.zipf_s for rank in range(1, len(spec.pool.faqs) + 1)]
        self._cumulative = list(itertools.accumulate(weights))

    def session(self, index: int) -> Session:
        spec = self.spec
        rng = random.Random(f"kefu-bench:{spec.seed}:{index}")  # str seeds are stable
        turns = rng.randint(spec.turns.lo, spec.turns.hi)
        messages = tuple(self._message(rng, index * 100 + turn + 100) for turn in range(turns))
        think = tuple(spec.think.sample(rng) for _ in range(turns - 1))
        return Session(index, messages, think)

    def _message(self, rng: random.Random, serial: int) -> Message:
        spec = self.spec
        draw = rng.random()
        if draw < spec.order_share:
            order = f"KF{rng.randrange(10**8):08d}"
            return Message(rng.choice(spec.pool.orders).replace("{order}", order), "order")
        if draw < spec.order_share + spec.repeat_share:
            [i] = rng.choices(range(len(spec.pool.faqs)), cum_weights=self._cumulative)
            return Message(spec.pool.faqs[i], "faq", i + 1)
        return Message(rng.choice(spec.pool.unique).replace("{n}", str(serial)), "unique")
