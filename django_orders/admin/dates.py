"""A date hierarchy that probes periods instead of scanning the table.

``PeriodProbingQuerySet.datetimes`` reads the first and last value, lists the periods between
them in Python and asks one ``EXISTS`` per period: two queries whatever the number of rows,
where Django's ``SELECT DISTINCT date_trunc(...)`` reads every row. See
docs/architecture/interfaces.md ("Counting rows").
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta, tzinfo

from django.conf import settings
from django.db.models import Exists, Max, Min, QuerySet
from django.utils import timezone

#: More candidate periods than this (data spread over centuries?): use Django's own query.
MAX_PERIODS = 400


def _add_month(year: int, month: int) -> tuple[int, int]:
    return (year + 1, 1) if month == 12 else (year, month + 1)


def _periods(first: datetime, last: datetime, kind: str) -> Iterator[tuple[datetime, datetime]]:
    """Naive local ``[start, end)`` bounds of each ``kind`` period from ``first`` to ``last``."""
    if kind == "year":
        for year in range(first.year, last.year + 1):
            yield datetime(year, 1, 1), datetime(year + 1, 1, 1)
    elif kind == "month":
        year, month = first.year, first.month
        while (year, month) <= (last.year, last.month):
            following = _add_month(year, month)
            yield datetime(year, month, 1), datetime(*following, 1)
            year, month = following
    else:
        day: date = first.date()
        while day <= last.date():
            start = datetime(day.year, day.month, day.day)
            yield start, start + timedelta(days=1)
            day += timedelta(days=1)


def _period_count(first: datetime, last: datetime, kind: str) -> int:
    if kind == "year":
        return last.year - first.year + 1
    if kind == "month":
        return (last.year - first.year) * 12 + last.month - first.month + 1
    return (last.date() - first.date()).days + 1


class PeriodProbingQuerySet(QuerySet):
    """A queryset whose ``datetimes()`` costs two indexed queries for years, months and days.

    The admin's date hierarchy first asks this same queryset object for
    ``aggregate(first=Min(field), last=Max(field))``; the answer is remembered on the object
    (never on its clones, which may be filtered differently), so ``datetimes()`` then needs only
    the ``EXISTS`` query.
    """

    def aggregate(self, *args, **kwargs):
        result = super().aggregate(*args, **kwargs)
        first, last = kwargs.get("first"), kwargs.get("last")
        if (
            not args
            and set(kwargs) == {"first", "last"}
            and type(first) is Min
            and type(last) is Max
            and first.source_expressions == last.source_expressions
            and not first.filter
            and not last.filter
        ):
            field = getattr(first.source_expressions[0], "name", None)
            self._known_bounds = {field: (result["first"], result["last"])}
        return result

    def _bounds(self, field_name: str) -> tuple[datetime | None, datetime | None]:
        known = getattr(self, "_known_bounds", {})
        if field_name in known:
            return known[field_name]
        bounds = self.order_by().aggregate(first=Min(field_name), last=Max(field_name))
        return bounds["first"], bounds["last"]

    def datetimes(self, field_name, kind, order="ASC", tzinfo: tzinfo | None = None):
        if kind not in ("year", "month", "day"):
            return super().datetimes(field_name, kind, order=order, tzinfo=tzinfo)
        zone = (tzinfo or timezone.get_current_timezone()) if settings.USE_TZ else None
        first, last = self._bounds(field_name)
        if first is None or last is None:
            return []
        if zone is not None:
            first, last = timezone.localtime(first, zone), timezone.localtime(last, zone)
        if _period_count(first, last, kind) > MAX_PERIODS:
            return super().datetimes(field_name, kind, order=order, tzinfo=tzinfo)
        periods = [
            (start.replace(tzinfo=zone), end.replace(tzinfo=zone))
            for start, end in _periods(first, last, kind)
        ]
        unfiltered = self.order_by()
        probes = {
            f"period_{index}": Exists(
                unfiltered.filter(**{f"{field_name}__gte": start, f"{field_name}__lt": end})
            )
            for index, (start, end) in enumerate(periods)
        }
        # One row of the table carries the EXISTS columns; each probe is evaluated once.
        rows = list(self.model._base_manager.order_by().annotate(**probes).values_list(*probes)[:1])
        row = rows[0] if rows else None
        if row is None:
            return []
        found = [start for (start, _end), present in zip(periods, row, strict=True) if present]
        return list(reversed(found)) if order == "DESC" else found
