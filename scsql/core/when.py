"""Recall by time: the time range a query or prompt names, and search within it.

:func:`read` finds the first time expression in a text ("yesterday", "last
week", "in March", "on 8 May", "3 days ago", "since Monday", "before
2026-05-01", ...) and returns the range it names, in UTC, relative to a
given now, with the query text without those words. Ranges are half-open
``[since, until)``; a range that is open on one side ("since Monday",
"before March") has ``None`` there. Calendar words count in UTC: a day is a
UTC day, a week starts on Monday, "last week" is the calendar week before
this one, a month or a weekday without a year is the last one not in the
future. A time named relative to an event ("before we switched to
pgvector") names no range here.

:func:`search_within` runs ``scsql.search`` for the query without its time
words, only among what happened in the range: ``p_since`` filters in the
database (by when a source happened, else when it was indexed), and the
end of the range by the hits' own times (``scsql_caller.source_times``:
a source's occurred_at, else when the hit was written). When nothing
in the range matches, the search is made again without the range, so
naming a time never loses an answer.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

UTC = dt.UTC

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTHS["sept"] = 9
_DAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3, "few": 3}

_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = "(?P<weekday>" + "|".join(sorted(_DAYS, key=len, reverse=True)) + ")"
_NUM = r"(?P<n>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_YEAR = r"(?:,?\s+(?P<year>(?:19|20)\d\d))"
_DAYNUM = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"

# Each form of time expression: its name (_range computes the range it names)
# and its pattern, after an optional preposition or bound (since, before, ...).
# The match that starts first in the text, the longest there, is the one read.
_ANCHORS: list[tuple[str, str]] = [
    ("iso", r"(?P<iy>\d{4})-(?P<im>\d\d)-(?P<id>\d\d)"),
    ("day_month", r"(?:the\s+)?" + _DAYNUM + r"(?:\s+of)?\s+" + _MONTH + _YEAR + "?"),
    ("month_day", _MONTH + r"\s+" + _DAYNUM + r"(?!\d)" + _YEAR + "?"),
    ("before_yesterday", r"the\s+day\s+before\s+yesterday"),
    ("yesterday", r"yesterday|last\s+night"),
    ("today", r"today|this\s+morning|this\s+afternoon|tonight|earlier\s+today"),
    ("past_n", r"(?:in\s+|during\s+|over\s+)?the\s+(?:last|past)\s+" + _NUM + r"\s+" + _UNIT),
    ("past_one", r"(?:in\s+|during\s+|over\s+)?the\s+(?:last|past)\s+(?P<unit>day|week|month|year)"),
    ("ago", _NUM + r"\s+" + _UNIT + r"\s+ago"),
    ("last_unit", r"(?:last|previous)\s+(?P<unit>week|month|year)"),
    ("this_unit", r"this\s+(?P<unit>week|month|year)"),
    ("last_weekday", r"(?P<last>(?:last|this\s+past)\s+)?" + _WEEKDAY + r"(?:'s)?"),
    ("month", r"(?:early\s+|late\s+|mid-?)?" + _MONTH + _YEAR + "?"),
]
_BOUND = {"since": "since", "after": "after", "before": "before", "until": "until", "till": "until",
          "prior to": "before"}
_PREP = r"(?:(?P<bound>since|after|before|until|till|prior\s+to)\s+|(?:in|on|during|from|of|at)\s+)?"
_FORMS = [(name, re.compile(rf"\b{_PREP}(?:{pat})\b", re.IGNORECASE)) for name, pat in _ANCHORS]
# A month name that is also a word ("may" is a verb) or an abbreviation names a
# time only with a preposition, an ordinal or a year ("on 8 May", "May 8th",
# "May 2026"); other month names alone need one too ("march" is a word).
_WORD_MONTHS = {"may", "mar", "jun", "jan", "aug", "dec", "oct", "sep", "nov", "feb", "apr", "jul", "sept"}
_MARKED = re.compile(r"\b(?:on|in|of|the|during|from|at|since|after|before|until|till|prior|early|late)\b|mid-?|"
                     r"\d(?:st|nd|rd|th)\b|(?:19|20)\d\d", re.IGNORECASE)


def clock() -> dt.datetime:
    """The time relative to which :func:`read` reads a text when given no now."""
    return dt.datetime.now(UTC)


@dataclass(frozen=True)
class Span:
    """A time range a text names: [since, until) in UTC (None: open on that side),
    the words that named it, and the text without them."""

    since: dt.datetime | None
    until: dt.datetime | None
    phrase: str
    rest: str

    def holds(self, at: dt.datetime | None) -> bool:
        """Whether AT falls in the range (an unknown time does not)."""
        if at is None:
            return False
        return (self.since is None or at >= self.since) and (self.until is None or at < self.until)


def _day(t: dt.datetime) -> dt.datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def _month(year: int, month: int) -> tuple[dt.datetime, dt.datetime]:
    after = (year + 1, 1) if month == 12 else (year, month + 1)
    return dt.datetime(year, month, 1, tzinfo=UTC), dt.datetime(*after, 1, tzinfo=UTC)


def _shift_months(year: int, month: int, by: int) -> tuple[int, int]:
    k = year * 12 + month - 1 - by
    return k // 12, k % 12 + 1


def _number(raw: str) -> int:
    raw = re.sub(r"\s+", " ", raw.lower())
    return int(raw) if raw.isdigit() else _NUMBERS[raw]


def _unit_range(unit: str, now: dt.datetime, back: int) -> tuple[dt.datetime, dt.datetime]:
    """The calendar UNIT (day, week, month, year) BACK units before the one holding NOW."""
    today = _day(now)
    if unit == "day":
        start = today - dt.timedelta(days=back)
        return start, start + dt.timedelta(days=1)
    if unit == "week":
        start = today - dt.timedelta(days=today.weekday() + 7 * back)
        return start, start + dt.timedelta(days=7)
    if unit == "month":
        return _month(*_shift_months(now.year, now.month, back))
    start = dt.datetime(now.year - back, 1, 1, tzinfo=UTC)
    return start, dt.datetime(now.year - back + 1, 1, 1, tzinfo=UTC)


def _last_dated(month: int, day: int | None, year: str | None, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The day (or month, DAY None) named without a year: the last one not after NOW."""
    y = int(year) if year else now.year
    start, end = _month(y, month)
    if day is not None:
        start = dt.datetime(y, month, min(day, calendar.monthrange(y, month)[1]), tzinfo=UTC)
        end = start + dt.timedelta(days=1)
    if not year and start > now:
        return _last_dated(month, day, str(y - 1), now)
    return start, end


def _range(name: str, g: dict[str, str | None], now: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
    today = _day(now)
    if name == "iso":
        try:
            start = dt.datetime(int(g["iy"]), int(g["im"]), int(g["id"]), tzinfo=UTC)
        except ValueError:
            return None
        return start, start + dt.timedelta(days=1)
    if name in ("day_month", "month_day"):
        day = int(g["day"])
        return _last_dated(_MONTHS[g["month"].lower()], day, g.get("year"), now) if 1 <= day <= 31 else None
    if name == "month":
        return _last_dated(_MONTHS[g["month"].lower()], None, g.get("year"), now)
    if name in ("yesterday", "before_yesterday", "today"):
        back = {"today": 0, "yesterday": 1, "before_yesterday": 2}[name]
        return _unit_range("day", now, back)
    if name in ("past_n", "past_one"):
        n = _number(g["n"]) if name == "past_n" else 1
        unit = g["unit"].lower()
        span = {"day": dt.timedelta(days=n), "week": dt.timedelta(weeks=n)}.get(unit)
        if span is None:
            y, m = _shift_months(now.year, now.month, n * (12 if unit == "year" else 1))
            return now.replace(year=y, month=m, day=min(now.day, calendar.monthrange(y, m)[1])), now
        return now - span, now
    if name == "ago":
        return _unit_range(g["unit"].lower(), now, _number(g["n"]))
    if name in ("last_unit", "this_unit"):
        return _unit_range(g["unit"].lower(), now, 1 if name == "last_unit" else 0)
    if name == "last_weekday":
        back = (today.weekday() - _DAYS[g["weekday"].lower()]) % 7 or 7
        start = today - dt.timedelta(days=back)
        return start, start + dt.timedelta(days=1)
    return None


def read(text: str, now: dt.datetime | None = None) -> Span | None:
    """The first time range TEXT names, relative to NOW (default: the current
    time, :func:`clock`; a naive NOW is taken as UTC), or None when it names none."""
    now = now or clock()
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    found = sorted((m.start(), -len(m.group(0)), i, m) for i, (name, form) in enumerate(_FORMS)
                   for m in form.finditer(text))
    for _, _, i, m in found:
        name, g = _FORMS[i][0], m.groupdict()
        bound = _BOUND.get(re.sub(r"\s+", " ", (g.pop("bound") or "").lower()), "")
        if name == "last_weekday" and not (bound or g.pop("last") or m.group(0).endswith("'s")
                                           or re.match(r"on\b", m.group(0), re.IGNORECASE)):
            continue
        g.pop("last", None)
        word_day = name in ("day_month", "month_day") and g["month"].lower() in _WORD_MONTHS
        if (name == "month" or word_day) and not _MARKED.search(m.group(0)):
            continue
        r = _range(name, g, now)
        if r is None:
            continue
        since, until = r
        if bound in ("since", "after"):
            since, until = (since if bound == "since" else until), None
        elif bound in ("before", "until"):
            since, until = None, (since if bound == "before" else until)
        rest = re.sub(r"\s{2,}", " ", (text[:m.start()] + " " + text[m.end():])).strip(" ,;:-")
        rest = re.sub(r"\s+([?.!,])", r"\1", rest)
        return Span(since, until, m.group(0).strip(), rest)
    return None


WIDE = 40  # hits searched from the range's start, of which those before its end are kept

Times = Callable[[list[dict[str, Any]]], dict[str, dt.datetime]]  # hits -> when their sources happened
Run = Callable[[str, "dt.datetime | None", int], list[dict[str, Any]]]  # (query, since, k) -> search hits


def happened(conn, hits: list[dict[str, Any]]) -> dict[str, dt.datetime]:
    """Each hit's source path with when its source happened (sources with an occurred_at)."""
    paths = sorted({h["source_path"] for h in hits if h.get("source_path")})
    if not paths:
        return {}
    rows = conn.execute("select source_path, occurred_at from scsql_caller.source_times(%s::text[])", (paths,))
    return {r["source_path"]: r["occurred_at"] for r in rows.fetchall()}


def in_range(span: Span, hits: list[dict[str, Any]], times: Times) -> list[dict[str, Any]]:
    """The HITS (rows of scsql.search) that happened in SPAN: when their
    source happened (TIMES, :func:`happened`), else when they were written."""
    at = times(hits)
    return [h for h in hits if span.holds(at.get(h["source_path"]) or h.get("written_at"))]


def query_of(span: Span, text: str) -> str:
    """What to search for: the text without its time words, unless nothing else is left."""
    return span.rest if re.search(r"\w{3,}", span.rest) else text


def search_within(span: Span, text: str, k: int, run: Run, times: Times,
                  how: str = "filter") -> list[dict[str, Any]]:
    """The best K hits for TEXT that happened in SPAN, by RUN (a call of
    scsql.search with a query, a since and a k) and TIMES (:func:`happened`
    on a connection). ``filter``: hits from the
    range's start (since, in the database), those before its end kept; when
    none is, the search for TEXT as given, without the range. ``boost``: the best of the
    unfiltered search, those in the range first."""
    query = query_of(span, text)
    wide = min(200, max(WIDE, 4 * k))
    if how == "boost":
        hits = run(query, None, wide)
        inside = in_range(span, hits, times)
        keys = {id(h) for h in inside}
        return (inside + [h for h in hits if id(h) not in keys])[:k]
    inside = in_range(span, run(query, span.since, wide), times)
    return inside[:k] if inside else run(text, None, k)
