"""The accounting exports in the API: ``exports/orders.csv``, ``exports/refunds.csv``,
``exports/payouts.csv`` and ``exports/balance_transactions.csv`` (GET), for staff with the
export's permission (``export_orders``, ``export_refunds``, ``export_payouts``,
``export_balance_transactions``: a 403 without).

The same filters as the commands, as query parameters: ``since`` (inclusive) and ``until``
(exclusive) in UTC unless they name their offset, ``status`` (repeatable) and ``currency``; a
value that does not parse or names nothing is a 400 naming the parameter, before any row is read.
The body is ``exports.ExportTable.stream`` in a ``StreamingHttpResponse``: the first rows leave
after the first fetch, memory stays flat, and a client that goes away closes the response,
which closes the cursor (the query ends).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from ..exports import (
    BALANCE_TRANSACTIONS,
    ORDERS,
    PAYOUTS,
    REFUNDS,
    ExportFilters,
    ExportTable,
    InvalidExportFilter,
    parse_instant,
)
from .base import HasOrdersPermission, OrdersAPIMixin, documented
from .filters import query_param


def _instant(request: Request, name: str) -> datetime | None:
    value = query_param(request, name)
    if not value:
        return None
    try:
        return parse_instant(value)
    except ValueError as exc:
        raise ValidationError({name: [str(exc)]}) from None


def export_parameters(table: ExportTable) -> list[OpenApiParameter]:
    noun = table.model._meta.verbose_name_plural
    return [
        OpenApiParameter(
            "since",
            OpenApiTypes.DATETIME,
            description=f"Only {noun} whose {table.time_field} is on or after this ISO 8601 "
            "date or date-time (UTC unless it names its offset; a date is its UTC midnight).",
        ),
        OpenApiParameter(
            "until",
            OpenApiTypes.DATETIME,
            description=f"Only {noun} whose {table.time_field} is before this (exclusive).",
        ),
        OpenApiParameter(
            "status",
            OpenApiTypes.STR,
            many=True,
            explode=True,
            description=f"Only {noun} with this {table.status_field}; repeat for several.",
        ),
        OpenApiParameter(
            "currency", OpenApiTypes.STR, description=f"Only {noun} in this currency, e.g. ghs."
        ),
    ]


def export_responses(table: ExportTable) -> dict[Any, OpenApiResponse]:
    columns = ", ".join(table.header)
    return {
        (200, "text/csv"): OpenApiResponse(
            OpenApiTypes.STR,
            description=f"UTF-8 CSV, streamed, a header row first: {columns}. Amounts in minor "
            "units and as decimals in the currency's ISO 4217 digits, times in UTC ISO 8601; "
            "a text cell starting with = + - @, a tab or a carriage return has a leading "
            "apostrophe (docs/exports.md).",
        ),
        400: OpenApiResponse(
            description="{parameter: [message]}: a filter that does not parse "
            "or names nothing; nothing was read."
        ),
        403: OpenApiResponse(description=f"Without the {table.codename} permission."),
    }


class ExportView(OrdersAPIMixin, APIView):
    """GET ``exports/<table>.csv`` (module docstring)."""

    table: ExportTable

    def get_permissions(self):
        return [IsAuthenticated(), HasOrdersPermission(self.table.codename)]

    def perform_content_negotiation(self, request: Request, force: bool = False):
        # The body is CSV whatever the Accept header says (a spreadsheet tool may ask for
        # text/csv, which no renderer of the API names); errors are still JSON.
        return super().perform_content_negotiation(request, force=True)

    def export(self, request: Request) -> StreamingHttpResponse:
        statuses = request.query_params.getlist("status")
        if any("\x00" in status for status in statuses):
            raise ValidationError({"status": ["Must not contain NUL characters."]})
        filters = ExportFilters(
            since=_instant(request, "since"),
            until=_instant(request, "until"),
            statuses=tuple(status for status in statuses if status),
            currency=query_param(request, "currency") or None,
        )
        try:
            self.table.check_filters(filters)
        except InvalidExportFilter as exc:
            raise ValidationError({exc.option: [exc.message]}) from None
        return self.table.download(self.table.rows(filters))


class OrdersExportView(ExportView):
    table = ORDERS

    @documented(
        operation_id="exports_orders_csv",
        parameters=export_parameters(ORDERS),
        responses=export_responses(ORDERS),
        description="The mirror's orders as CSV, oldest first (manage.py export_orders).",
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        return self.export(request)


class RefundsExportView(ExportView):
    table = REFUNDS

    @documented(
        operation_id="exports_refunds_csv",
        parameters=export_parameters(REFUNDS),
        responses=export_responses(REFUNDS),
        description="The mirror's refunds as CSV, each with its order and reason, oldest "
        "first (manage.py export_refunds).",
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        return self.export(request)


class PayoutsExportView(ExportView):
    table = PAYOUTS

    @documented(
        operation_id="exports_payouts_csv",
        parameters=export_parameters(PAYOUTS),
        responses=export_responses(PAYOUTS),
        description="The mirror's payouts as CSV, oldest first (manage.py export_payouts).",
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        return self.export(request)


class BalanceTransactionsExportView(ExportView):
    table = BALANCE_TRANSACTIONS

    @documented(
        operation_id="exports_balance_transactions_csv",
        parameters=export_parameters(BALANCE_TRANSACTIONS),
        responses=export_responses(BALANCE_TRANSACTIONS),
        description="The mirror's balance transactions as CSV, each with its order's number "
        "and its refund's reference, oldest first; status is the transaction's type "
        "(manage.py export_balance_transactions).",
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        return self.export(request)
