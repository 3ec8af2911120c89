"""Weibo's `created_at` in every spelling it uses, as an aware UTC datetime.

The ajax API gives `Wed Mar 23 15:10:31 +0800 2022`. m.weibo.cn gives the same
for recent posts but often a relative form instead: 刚刚 (just now), 5分钟前,
15小时前, 昨天 12:00, `07-14` (this year), `2023-07-14`. Relative forms are read
in China time (UTC+8), against an injectable `now` so tests are stable.
"""
from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone

CHINA = timezone(timedelta(hours=8))
# A date without a time of day is placed at noon China time (04:00 UTC), so it
# lands on the same UTC day for every post written after 08:00 China time.
DATE_ONLY_TIME = time(12, 0)

_RELATIVE = re.compile(r"^(\d+)\s*(秒|分钟|小时|天)前$")
_UNITS = {"秒": "seconds", "分钟": "minutes", "小时": "hours", "天": "days"}
_YESTERDAY = re.compile(r"^昨天\s*(\d{1,2}):(\d{2})$")
_TODAY = re.compile(r"^(?:今天\s*)?(\d{1,2}):(\d{2})$")
_MONTH_DAY = re.compile(r"^(\d{1,2})-(\d{1,2})(?:\s+(\d{1,2}):(\d{2}))?$")
_FULL_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:\s+(\d{1,2}):(\d{2})(?::(\d{2}))?)?$")
_ABSOLUTE_FORMAT = "%a %b %d %H:%M:%S %z %Y"


def parse_created_at(text: object, now: datetime | None = None) -> datetime | None:
    """UTC datetime, or None when the text is absent or in no known form."""
    if not isinstance(text, str) or not text.strip() or len(text) > 64:
        return None
    text = text.strip()
    try:
        return datetime.strptime(text, _ABSOLUTE_FORMAT).astimezone(timezone.utc)
    except (ValueError, OverflowError):  # OverflowError: year 1 east of UTC falls off the calendar
        pass
    try:
        local_now = (now or datetime.now(timezone.utc)).astimezone(CHINA)
        moment = _relative(text, local_now)
        return moment.astimezone(timezone.utc) if moment else None
    except (ValueError, OverflowError):  # "99999999天前": before year 1
        return None


def _relative(text: str, now: datetime) -> datetime | None:
    if text in ("刚刚", "just now"):
        return now
    if match := _RELATIVE.match(text):
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    if match := _YESTERDAY.match(text):
        return _at(now.date() - timedelta(days=1), match.group(1), match.group(2))
    if match := _TODAY.match(text):
        return _at(now.date(), match.group(1), match.group(2))
    if match := _MONTH_DAY.match(text):
        month, day = int(match.group(1)), int(match.group(2))
        # "12-30" read in January is last year's.
        year = now.year - 1 if (month, day) > (now.month, now.day) else now.year
        return _at_date(year, month, day, match.group(3), match.group(4))
    if match := _FULL_DATE.match(text):
        year, month, day, hour, minute, _ = match.groups()
        return _at_date(int(year), int(month), int(day), hour, minute)
    return None


def _at(day: date, hour: str, minute: str) -> datetime | None:
    try:
        return datetime.combine(day, time(int(hour), int(minute)), tzinfo=CHINA)
    except ValueError:
        return None


def _at_date(year: int, month: int, day: int, hour: str | None, minute: str | None) -> datetime | None:
    try:
        when = date(year, month, day)
    except ValueError:
        return None
    if hour is None:
        return datetime.combine(when, DATE_ONLY_TIME, tzinfo=CHINA)
    return _at(when, hour, minute or "0")
