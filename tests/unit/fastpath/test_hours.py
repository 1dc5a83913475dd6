"""ServiceHours: the spec grammar, open/closed across days and offsets, the handoff reply."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta, timezone

import pytest

from kefu.fastpath.hours import ServiceHours, handoff_reply

DEFAULT = ServiceHours.parse("Mon-Sat 09:00-18:00 +08:00")
SGT = timezone(timedelta(hours=8))


def test_parse_the_default() -> None:
    expected = ServiceHours(
        start=time(9, 0), end=time(18, 0), days=frozenset(range(6)), utc_offset=timedelta(hours=8)
    )
    assert expected == DEFAULT


@pytest.mark.parametrize(
    ("spec", "days", "offset"),
    [
        ("mon-fri 08:30-17:00 UTC-05:00", {0, 1, 2, 3, 4}, timedelta(hours=-5)),
        ("Mon-Fri,Sun 08:30-17:00 UTC+8", {0, 1, 2, 3, 4, 6}, timedelta(hours=8)),
        ("Fri-Mon 10:00-16:00 +0530", {4, 5, 6, 0}, timedelta(hours=5, minutes=30)),
        ("Saturday,Sunday 10:00-16:00 Z", {5, 6}, timedelta(0)),
        ("daily 00:00-24:00 UTC", set(range(7)), timedelta(0)),
        ("Wed 9:00-12:00 gmt-3", {2}, timedelta(hours=-3)),
    ],
)
def test_parse_variants(spec: str, days: set[int], offset: timedelta) -> None:
    hours = ServiceHours.parse(spec)
    assert hours.days == frozenset(days)
    assert hours.utc_offset == offset


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "must be 'DAYS HH:MM-HH:MM UTC-OFFSET'"),
        ("Mon-Sat 09:00-18:00", "must be 'DAYS HH:MM-HH:MM UTC-OFFSET'"),
        ("Mon-Sat 09:00 18:00 +08:00", "must be 'DAYS HH:MM-HH:MM UTC-OFFSET'"),
        ("Mon-Sut 09:00-18:00 +08:00", "unknown day 'sut'"),
        ("Mon-Sat 0900-1800 +08:00", "'0900' is not a time like 09:00"),
        ("Mon-Sat 09:00 +08:00", "'09:00' must be HH:MM-HH:MM"),
        ("Mon-Sat 9am-6pm +08:00", "'9am' is not a time like 09:00"),
        ("Mon-Sat 09:00-25:00 +08:00", "'25:00' is not a valid time"),
        ("Mon-Sat 18:00-09:00 +08:00", "overnight hours are not supported"),
        ("Mon-Sat 09:00-09:00 +08:00", "must come after the start"),
        ("Mon-Sat 09:00-18:00 Asia/Singapore", "is not a UTC offset"),
        ("Mon-Sat 09:00-18:00 +15:00", "out of range"),
    ],
)
def test_parse_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match="service hours") as info:
        ServiceHours.parse(spec)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("now", "is_open"),
    [
        (datetime(2025, 6, 2, 9, 0, tzinfo=SGT), True),  # Monday at opening
        (datetime(2025, 6, 2, 17, 59, tzinfo=SGT), True),
        (datetime(2025, 6, 2, 18, 0, tzinfo=SGT), False),  # closing time is closed
        (datetime(2025, 6, 2, 8, 59, tzinfo=SGT), False),
        (datetime(2025, 6, 7, 12, 0, tzinfo=SGT), True),  # Saturday
        (datetime(2025, 6, 8, 12, 0, tzinfo=SGT), False),  # Sunday
        (datetime(2025, 6, 2, 1, 0, tzinfo=UTC), True),  # 09:00 in Singapore
        (datetime(2025, 6, 7, 23, 0, tzinfo=UTC), False),  # Sunday 07:00 in Singapore
        (datetime(2025, 6, 8, 20, 0, tzinfo=timezone(timedelta(hours=-5))), True),  # Mon 09:00
        (datetime(2025, 6, 2, 1, 0), True),  # naive: taken as UTC
    ],
)
def test_is_open(now: datetime, is_open: bool) -> None:
    assert DEFAULT.is_open(now) is is_open


def test_all_day() -> None:
    hours = ServiceHours.parse("daily 00:00-24:00 UTC")
    assert hours.is_open(datetime(2025, 6, 8, 23, 59, 59, tzinfo=UTC))
    assert hours.is_open(datetime(2025, 6, 9, 0, 0, tzinfo=UTC))


@pytest.mark.parametrize(
    ("spec", "en", "zh"),
    [
        (
            "Mon-Sat 09:00-18:00 +08:00",
            "Mon\u2013Sat 09:00\u201318:00 (UTC+08:00)",
            "周一至周六 09:00\u201318:00（UTC+08:00）",
        ),
        (
            "Mon,Wed,Fri 09:00-12:00 UTC-05:30",
            "Mon, Wed, Fri 09:00\u201312:00 (UTC-05:30)",
            "周一、周三、周五 09:00\u201312:00（UTC-05:30）",
        ),
        ("Sat-Sun 10:00-16:00 Z", "Sat, Sun 10:00\u201316:00 (UTC+00:00)", None),
        (
            "Fri-Mon 10:00-16:00 Z",
            "Fri\u2013Mon 10:00\u201316:00 (UTC+00:00)",
            "周五至周一 10:00\u201316:00（UTC+00:00）",
        ),
        (
            "daily 00:00-24:00 UTC",
            "Daily 00:00\u201324:00 (UTC+00:00)",
            "每天 00:00\u201324:00（UTC+00:00）",
        ),
    ],
)
def test_describe(spec: str, en: str, zh: str | None) -> None:
    hours = ServiceHours.parse(spec)
    assert hours.describe("en") == en
    if zh is not None:
        assert hours.describe("zh") == zh


OPEN = datetime(2025, 6, 2, 10, 0, tzinfo=SGT)
CLOSED = datetime(2025, 6, 8, 10, 0, tzinfo=SGT)


def test_handoff_reply_open() -> None:
    assert handoff_reply(DEFAULT, OPEN, "en", "asked for a human") == (
        "I'm connecting you with a human agent — someone will join this chat shortly."
    )
    assert "转接人工客服" in handoff_reply(DEFAULT, OPEN, "zh", None)


def test_handoff_reply_closed_names_the_hours() -> None:
    en = handoff_reply(DEFAULT, CLOSED, "en", "asked for a human")
    assert DEFAULT.describe("en") in en
    assert "A human will reply here when they are back." in en
    zh = handoff_reply(DEFAULT, CLOSED, "zh", None)
    assert DEFAULT.describe("zh") in zh
    assert "非工作时间" in zh


def test_handoff_reply_apologises_to_an_angry_customer() -> None:
    assert handoff_reply(DEFAULT, OPEN, "en", "angry").startswith("I'm sorry for the trouble.")
    assert handoff_reply(DEFAULT, CLOSED, "zh", "angry").startswith("非常抱歉")
    assert not handoff_reply(DEFAULT, OPEN, "en", "the bot failed twice").startswith("I'm sorry")
