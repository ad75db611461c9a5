"""Filters and search of the staff read API, on the same indexes as the admin.

Search reuses the admin's (``mirror.queries``): an exact order id, order number, customer id or
e-mail address, or every word in the customer's name, matched on the small customer table
first so the order table is reached through indexes. A malformed filter value is a 400 that
names the parameter, never an empty page that looks like "no orders"; so is a value holding
a NUL character (``%00``), which PostgreSQL refuses in a query.
"""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend, SearchFilter
from rest_framework.request import Request

from ..mirror.queries import customers_matching, search_orders


def _parse_instant(name: str, value: str) -> datetime:
    """An ISO 8601 date-time (naive: the current time zone) or a date (its midnight), so
    ``initiated_after=2026-11-01&initiated_before=2026-12-01`` is the month of November."""
    try:
        parsed = parse_datetime(value)
        day = parse_date(value) if parsed is None else None
    except ValueError:  # well formed, but no such date or time (2026-02-30)
        parsed = day = None
    if parsed is None and day is None:
        raise ValidationError(
            {name: ["Use an ISO 8601 date or date-time, e.g. 2026-11-24T10:00:00Z."]}
        )
    if parsed is None:
        assert day is not None  # refused just above otherwise
        parsed = datetime.combine(day, time.min)
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    return parsed


def query_param(request: Request, name: str, default: str = "") -> str:
    """A query parameter's value; a 400 naming it when it holds a NUL (module docstring)."""
    value = request.query_params.get(name, default)
    if "\x00" in value:
        raise ValidationError({name: ["Must not contain NUL characters."]})
    return value


def _param(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "required": False,
        "in": "query",
        "description": description,
        "schema": schema,
    }


class OrderFilterBackend(BaseFilterBackend):
    """``status``, ``currency``, ``customer`` (exact) and ``initiated_after`` (inclusive) /
    ``initiated_before`` (exclusive) on ``initiated_at``."""

    def filter_queryset(self, request: Request, queryset: QuerySet, view: Any) -> QuerySet:
        conditions = Q()
        for name, lookup in (("status", "status"), ("customer", "customer_id")):
            value = query_param(request, name)
            if value:
                conditions &= Q(**{lookup: value})
        currency = query_param(request, "currency")
        if currency:
            conditions &= Q(currency=currency.lower())
        after = query_param(request, "initiated_after")
        before = query_param(request, "initiated_before")
        if after:
            conditions &= Q(initiated_at__gte=_parse_instant("initiated_after", after))
        if before:
            conditions &= Q(initiated_at__lt=_parse_instant("initiated_before", before))
        return queryset.filter(conditions) if conditions else queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        text = {"type": "string"}
        instant = {"type": "string", "format": "date-time"}
        return [
            _param("status", "Exact status, e.g. requires_payment.", text),
            _param("currency", "Three-letter currency code, e.g. ghs.", text),
            _param("customer", "Exact customer id (cu_…).", text),
            _param("initiated_after", "initiated_at on or after (ISO 8601 date or time).", instant),
            _param("initiated_before", "initiated_at before (ISO 8601 date or time).", instant),
        ]


class OrderSearchFilter(SearchFilter):
    """``?search=``: the admin's order search (module docstring)."""

    def filter_queryset(self, request: Request, queryset: QuerySet, view: Any) -> QuerySet:
        term = query_param(request, self.search_param)
        return search_orders(queryset, term) if term.strip() else queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            _param(
                self.search_param,
                "An order id, order number, customer id or e-mail address (exact), or words "
                "of the customer's name.",
                {"type": "string"},
            )
        ]


class CustomerSearchFilter(OrderSearchFilter):
    """``?search=``: an exact customer id, an e-mail address in any case, or every word in the
    name (as the admin)."""

    def filter_queryset(self, request: Request, queryset: QuerySet, view: Any) -> QuerySet:
        words = query_param(request, self.search_param).split()
        if not words:
            return queryset
        matching = Q(pk__in=customers_matching(words).values("pk"))
        return queryset.filter(matching | Q(pk=words[0]) if len(words) == 1 else matching)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            _param(
                self.search_param,
                "A customer id or e-mail address (exact), or words of the customer's name.",
                {"type": "string"},
            )
        ]
