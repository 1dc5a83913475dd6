"""When human agents work, and the reply that hands a customer over to them.

The handoff reply is templated (no model call) and must not promise an agent
"shortly" at 3 a.m., so it needs to know whether the service is open now in the
shop's own time zone — a fixed UTC offset, as the shop's hours are published
(no DST rules to get wrong, no tz database needed).

Grammar of a spec (case-insensitive, parts separated by spaces)::

    spec   := DAYS " " HH:MM "-" HH:MM " " OFFSET
    DAYS   := item ("," item)*          item := DAY | DAY "-" DAY | "daily"
    DAY    := mon | tue | wed | thu | fri | sat | sun   (full names work too)
    OFFSET := ["UTC"] ("+"|"-") H[H][:MM]  |  "UTC"  |  "Z"

``Mon-Sat 09:00-18:00 +07:00``, ``Mon-Fri,Sun 08:30-17:00 UTC-05:00``,
``daily 00:00-24:00 UTC``. A day range may wrap (``Fri-Mon``); the end time may
be 24:00 (end of day) but must come after the start: overnight shifts are not
supported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, timezone

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_EN_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_ZH_DAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_FULL_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_TIME = re.compile(r"(\d{1,2}):(\d{2})")
_OFFSET = re.compile(r"(?:utc|gmt)?([+-])(\d{1,2})(?::?(\d{2}))?")
_END_OF_DAY = time.max  # "24:00"
_DASH = "\u2013"  # en dash, as in "Mon\u2013Sat"


@dataclass(frozen=True, slots=True)
class ServiceHours:
    start: time
    end: time  # time.max stands for 24:00
    days: frozenset[int]  # 0 = Monday, as datetime.weekday()
    utc_offset: timedelta

    @classmethod
    def parse(cls, spec: str) -> ServiceHours:
        parts = spec.split()
        if len(parts) != 3:
            raise ValueError(
                f"service hours {spec!r} must be 'DAYS HH:MM-HH:MM UTC-OFFSET', "
                "e.g. 'Mon-Fri 08:30-17:30 -05:00'"
            )
        days_part, times_part, offset_part = parts
        days = _parse_days(days_part)
        start_text, sep, end_text = times_part.partition("-")
        if not sep:
            raise ValueError(f"service hours: {times_part!r} must be HH:MM-HH:MM")
        start = _parse_time(start_text, end=False)
        end = _parse_time(end_text, end=True)
        if end <= start:
            raise ValueError(
                f"service hours: the end {end_text} must come after the start {start_text} "
                "(overnight hours are not supported)"
            )
        return cls(start, end, days, _parse_offset(offset_part))

    def is_open(self, now: datetime) -> bool:
        """Whether agents work at ``now``; a naive ``now`` is taken as UTC."""
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        local = now.astimezone(timezone(self.utc_offset))
        return local.weekday() in self.days and self.start <= local.time() < self.end

    def describe(self, lang: str) -> str:
        """E.g. "Mon-Sat 09:00-18:00 (UTC+08:00)" / "周一至周六 09:00-18:00（UTC+08:00）",
        with en dashes."""
        span = f"{_clock(self.start)}{_DASH}{_clock(self.end)}"
        offset = _describe_offset(self.utc_offset)
        if lang == "zh":
            return f"{_describe_days(self.days, _ZH_DAYS, '至', '、', '每天')} {span}（{offset}）"
        return f"{_describe_days(self.days, _EN_DAYS, _DASH, ', ', 'Daily')} {span} ({offset})"


def handoff_reply(hours: ServiceHours, now: datetime, lang: str, reason: str | None) -> str:
    """The templated reply of a handoff: a human joins now, or when the agents are back."""
    zh = lang == "zh"
    if reason == "angry":
        sorry = "非常抱歉给您带来不好的体验。" if zh else "I'm sorry for the trouble. "
    else:
        sorry = ""
    if hours.is_open(now):
        body = (
            "我正在为您转接人工客服，请稍候，客服马上会在这里回复您。"
            if zh
            else "I'm connecting you with a human agent — someone will join this chat shortly."
        )
    elif zh:
        body = (
            f"现在是非工作时间，我们的人工客服工作时间为{hours.describe('zh')}，"
            "客服上班后会在这里回复您。"
        )
    else:
        body = (
            f"Our agents are offline right now: they work {hours.describe('en')}. "
            "A human will reply here when they are back."
        )
    return sorry + body


def _parse_days(text: str) -> frozenset[int]:
    days: set[int] = set()
    for item in text.lower().split(","):
        if item == "daily":
            days.update(range(7))
            continue
        first, sep, last = item.partition("-")
        a = _day(first)
        if not sep:
            days.add(a)
            continue
        b = _day(last)
        days.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(days)


def _day(text: str) -> int:
    for names in (DAY_NAMES, _FULL_NAMES):
        if text in names:
            return names.index(text)
    raise ValueError(
        f"service hours: unknown day {text!r}; use Mon Tue Wed Thu Fri Sat Sun, "
        "ranges like Mon-Sat, lists like Mon-Fri,Sun, or 'daily'"
    )


def _parse_time(text: str, *, end: bool) -> time:
    match = _TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"service hours: {text!r} is not a time like 09:00")
    hour, minute = int(match[1]), int(match[2])
    if end and (hour, minute) == (24, 0):
        return _END_OF_DAY
    if hour > 23 or minute > 59:
        raise ValueError(f"service hours: {text!r} is not a valid time (00:00-23:59, or 24:00)")
    return time(hour, minute)


def _parse_offset(text: str) -> timedelta:
    lowered = text.lower()
    if lowered in ("utc", "gmt", "z"):
        return timedelta(0)
    match = _OFFSET.fullmatch(lowered)
    if match is None:
        raise ValueError(
            f"service hours: {text!r} is not a UTC offset; write it like +08:00, UTC+8 or UTC"
        )
    sign = -1 if match[1] == "-" else 1
    hours, minutes = int(match[2]), int(match[3] or 0)
    if hours > 14 or minutes > 59 or (hours == 14 and minutes):
        raise ValueError(f"service hours: UTC offset {text!r} is out of range (-14:00..+14:00)")
    return sign * timedelta(hours=hours, minutes=minutes)


def _clock(value: time) -> str:
    return "24:00" if value == _END_OF_DAY else value.strftime("%H:%M")


def _describe_offset(offset: timedelta) -> str:
    total = int(offset.total_seconds()) // 60
    sign = "-" if total < 0 else "+"
    hours, minutes = divmod(abs(total), 60)
    return f"UTC{sign}{hours:02d}:{minutes:02d}"


def _describe_days(
    days: frozenset[int], names: tuple[str, ...], to: str, sep: str, every: str
) -> str:
    if len(days) == 7:
        return every
    ordered = sorted(days)
    runs: list[list[int]] = []
    for day in ordered:
        if runs and runs[-1][-1] == day - 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    # Sat-Sun-Mon style weeks: join a run ending on Sunday with one starting on Monday.
    if len(runs) > 1 and runs[0][0] == 0 and runs[-1][-1] == 6:
        runs[0] = runs.pop() + runs[0]
    parts = []
    for run in runs:
        if len(run) == 1:
            parts.append(names[run[0]])
        elif len(run) == 2:
            parts.append(f"{names[run[0]]}{sep}{names[run[1]]}")
        else:
            parts.append(f"{names[run[0]]}{to}{names[run[-1]]}")
    return sep.join(parts)
