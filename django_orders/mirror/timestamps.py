"""Upstream timestamps as aware UTC datetimes: ISO 8601 with ``Z`` or an offset, any number
of fractional digits, and the forms the provider's SDK also reads (api-notes.md). A timestamp
that cannot be read is an ``InvalidRecord`` naming its field, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec

from ..exceptions.wire import InvalidRecord

_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"(?:(Z)|([+-])(\d{2}):?(\d{2}))$",
    re.IGNORECASE,
)


#: Forms the provider's SDK reads that RFC 3339 leaves out but that say one instant all the
#: same: no seconds (``10:30Z``, seconds 0) and an offset of whole hours (``+05``). Only tried
#: after ``_TIMESTAMP`` failed, so the common forms pay nothing for it. Still refused: no
#: offset (the zone would be a guess), a time of hours only, anything else.
_TOLERATED_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"(?:(Z)|([+-])(\d{2})(?::?(\d{2}))?)$",
    re.IGNORECASE,
)


def parse_timestamp(value: Any, *, field: str = "timestamp") -> datetime:
    """ISO 8601 with ``Z`` or an offset and any number of fractional digits -> aware UTC.

    Fractions beyond microseconds are truncated (never rounded up into the next second). A
    timestamp without an offset is refused: guessing its zone would silently shift it. Also
    read, as the provider's SDK reads them: a time without seconds and an offset of whole hours
    (``2024-05-01T10:30+05``).
    """
    match = _TIMESTAMP.match(value) if isinstance(value, str) else None
    if match is None:
        return _parse_tolerated(value, field)
    groups = match.groups()
    fraction = groups[6]
    if (fraction is None or len(fraction) <= 6) and groups[3] < "24":
        # The common forms, once the pattern has vouched for the shape: the standard parser
        # reads them faster than the steps below (benchmarks/README.md). It refuses lower-case
        # letters and impossible dates, which then take the steps below (and their message);
        # hour 24, which newer Pythons read as the next midnight, never goes to it.
        try:
            return datetime.fromisoformat(value).astimezone(UTC)
        except (ValueError, OverflowError):
            pass
    return _build(value, field, groups)


def _parse_tolerated(value: Any, field: str) -> datetime:
    """The slow path: the forms of ``_TOLERATED_TIMESTAMP``, or the error naming the field."""
    match = _TOLERATED_TIMESTAMP.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidRecord(
            f"{field} must be an ISO 8601 timestamp with Z or an offset, not {value!r}"
        )
    return _build(value, field, match.groups())


def _build(value: str, field: str, groups: tuple[str | None, ...]) -> datetime:
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = groups
    assert year and month and day  # groups the pattern always matches
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        # Both inside the try: an offset of 24 hours or more (``+25:00``) is refused by
        # ``timezone`` itself, and must fail as a bad record naming the field like a bad date.
        if zulu:
            zone = UTC
        else:
            offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
            zone = timezone(-offset if sign == "-" else offset)
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            micro,
            zone,
        )
    except ValueError as exc:
        raise InvalidRecord(f"{field} is not a real date and time: {value!r} ({exc})") from None
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        # 9999-12-31T23:59:59-01:00 or 0001-01-01T00:00:00+01:00: real, but not in UTC.
        raise InvalidRecord(
            f"{field} is outside the dates that can be stored in UTC: {value!r}"
        ) from None


def parse_optional_timestamp(value: Any, *, field: str) -> datetime | None:
    """``None`` for a missing or null timestamp, otherwise exactly ``parse_timestamp``.

    Strict on purpose, like ``completed_at``: a present timestamp that cannot be read is a
    broken record, and the sync reports it naming the page, the record and the field rather
    than storing a guess.
    """
    return None if value is None else parse_timestamp(value, field=field)


# --- many at once --------------------------------------------------------------------------------

_COMMON = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
#: Timestamps one a line, all of the common form: one match in C for all of them.
_LINES_OF_TIMESTAMPS = re.compile(rf"(?:{_COMMON}\n)*{_COMMON}")
#: Fractions beyond microseconds are cut, never rounded (msgspec would round).
_LONG_FRACTION = re.compile(r"(\.[0-9]{6})[0-9]+")
_TO_DATETIMES = msgspec.json.Decoder(list[datetime])


def read_timestamps(texts: Sequence[str]) -> dict[str, datetime]:
    """``parse_timestamp`` of each text, read in two calls in C for them all (a page's
    orders'); empty if any is not of the common form, or not a real date: each is then read
    by ``parse_timestamp`` alone, which says what is wrong with it."""
    if not texts:
        return {}
    joined = "\n".join(texts)
    # A line count short of the texts' would mean a text holding a line break of its own.
    if _LINES_OF_TIMESTAMPS.fullmatch(joined) is None or joined.count("\n") != len(texts) - 1:
        return {}
    if "." in joined:
        joined = _LONG_FRACTION.sub(r"\1", joined)
    try:
        # The texts hold no quote or backslash: the pattern vouched.
        values = _TO_DATETIMES.decode(('["' + joined.replace("\n", '","') + '"]').encode())
        moments = [value if value.tzinfo is UTC else value.astimezone(UTC) for value in values]
    except (msgspec.DecodeError, OverflowError, ValueError):
        return {}  # 2026-02-30, or a date that leaves the calendar in UTC
    return dict(zip(texts, moments, strict=True))
