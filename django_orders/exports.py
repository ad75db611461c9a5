"""Accounting exports: the mirror's rows as CSV, streamed with flat memory at a million rows.

One declarative table per model (``ORDERS``, ``REFUNDS``, ``PAYOUTS``,
``BALANCE_TRANSACTIONS``): its columns (a header name, where the value is read from, and what
kind of cell it makes), the time its ``since``/``until`` range is on and its permission. The
command (``export_<name>``), the admin's "Export CSV" action and the REST
``exports/<name>.csv`` all stream ``ExportTable.stream``, so the three give the same bytes.
Adding an export is one table here, one command and one route.

Why the cells look as they do (docs/exports.md): amounts are integer minor units AND the
decimal in the currency's ISO 4217 digits (JPY 0, KWD 3: ``money.minor_unit_digits``), written
as plain numbers; times are UTC ISO 8601 (``2026-03-14T09:30:00Z``); a text cell that starts
with ``= + - @``, a tab or a carriage return gets a leading apostrophe, so a spreadsheet shows
it instead of running it as a formula (CSV injection). Amounts are never escaped: a refund's
``-`` is never written (amounts are stored unsigned) and a number is not a formula.

Streamed: one query, a server-side cursor on PostgreSQL (where the database makes every
cell) and ``values_list(...).iterator(chunk_size=...)`` elsewhere; each chunk of rows becomes
one piece of text. Closing the stream (a client gone mid-download: Django closes the response,
which closes the generator) closes the cursor, which ends the query.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Generator, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from enum import Enum
from functools import cached_property
from itertools import islice
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections, models, transaction
from django.db.models import F, Func, OuterRef, Q, QuerySet, Subquery, TextField
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from .conf import orders_settings
from .models import BalanceTransaction, Order, OrderRequest, Payout, Refund
from .money import DEFAULT_DIGITS, MINOR_UNIT_DIGITS, minor_unit_digits

__all__ = [
    "BALANCE_TRANSACTIONS",
    "CHUNK_SIZE",
    "EXPORTS",
    "FIRST_CHUNK_SIZE",
    "ORDERS",
    "PAYOUTS",
    "REFUNDS",
    "Cell",
    "Column",
    "ExportFilters",
    "ExportTable",
    "InvalidExportFilter",
    "escape_text",
    "parse_instant",
]

#: Rows fetched from the cursor at a time, and written as one piece of the stream.
CHUNK_SIZE = 5000
#: The first fetch on PostgreSQL: small, so the first byte leaves before 5,000 rows are read.
FIRST_CHUNK_SIZE = 200
#: What a spreadsheet reads as the start of a formula (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class Cell(Enum):
    """What a column's value becomes in the CSV."""

    TEXT = "text"  # a string, escaped against formulas; NULL is empty
    MINOR_UNITS = "minor_units"  # an integer amount in the currency's minor unit, as it is
    AMOUNT = "amount"  # the same integer as a decimal in the currency's ISO 4217 digits
    TIME = "time"  # a UTC ISO 8601 instant; NULL is empty


@dataclass(frozen=True)
class Column:
    """One CSV column: its header, the ``values_list`` path it is read from, its kind."""

    name: str
    source: str
    cell: Cell = Cell.TEXT


@dataclass(frozen=True)
class ExportFilters:
    """Which rows: ``since`` inclusive and ``until`` exclusive on the table's time, any of
    ``statuses``, one ``currency`` (any case). Empty: every row."""

    since: datetime | None = None
    until: datetime | None = None
    statuses: tuple[str, ...] = ()
    currency: str | None = None


class InvalidExportFilter(ValueError):
    """A filter value that names nothing: ``option`` is the flag or parameter it came in."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message


def escape_text(value: Any) -> str:
    """A text cell as a spreadsheet must show it: ``=SUM(A1)`` -> ``'=SUM(A1)``."""
    if value is None:
        return ""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def utc_iso(value: datetime | None) -> str:
    """``2026-03-14T09:30:00Z``, ``2026-03-14T09:30:00.25Z``: the fraction of a second when
    there is one, without trailing zeros (as ``UtcIsoText`` writes it); NULL is empty."""
    if value is None:
        return ""
    if timezone.is_naive(value):  # USE_TZ = False: stored in the current time zone
        value = timezone.make_aware(value)
    text = value.astimezone(UTC).replace(tzinfo=None).isoformat()
    return (text.rstrip("0") if value.microsecond else text) + "Z"


class UtcIsoText(Func):
    """A PostgreSQL ``timestamptz`` as ``utc_iso`` writes it, formatted by the database."""

    template = (
        "regexp_replace(to_char(%(expressions)s AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS.US'), '\\.?0+$', '') || 'Z'"
    )
    output_field = TextField()


class _RepeatingFunc(Func):
    """A function whose SQL names its arguments more than once (``{0}``, ``{1}``): each is
    compiled once and its SQL and parameters repeated where it is named. Give it columns:
    a subquery argument would run once for each time it is named."""

    sql_template = ""
    output_field = TextField()

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra_context: Any) -> Any:
        compiled = [compiler.compile(argument) for argument in self.get_source_expressions()]
        pieces = self.sql_template.split("{")
        sql, params = pieces[0], []
        for piece in pieces[1:]:
            index, rest = piece.split("}", 1)
            argument_sql, argument_params = compiled[int(index)]
            sql += f"({argument_sql}){rest}"
            params.extend(argument_params)
        return sql, params


class EscapedText(Func):
    """PostgreSQL: ``escape_text`` in SQL (NULL stays NULL: the csv writer's empty cell). A
    regular expression names its argument once, where a ``CASE`` would repeat it, and with
    it a subquery argument (the order's reference), three times a row."""

    template = r"regexp_replace(%(expressions)s::text, '^([-=+@\t\r])', '''\1')"
    output_field = TextField()


def _decimal_sql() -> str:
    """``DecimalText``'s SQL: a branch per number of digits other than two."""

    def scaled(digits: int) -> str:
        # A product is exact in numeric, and its scale the factor's: 2450 * 0.01 is 24.50.
        # (A quotient is not: 9223372036854775807 / 100.0 rounds to 16 significant digits.)
        return "{0}::text" if digits == 0 else f"({{0}} * 0.{'0' * (digits - 1)}1)::text"

    branches = []
    for digits in sorted(set(MINOR_UNIT_DIGITS.values()) - {DEFAULT_DIGITS}):
        codes = ", ".join(f"'{c}'" for c, d in sorted(MINOR_UNIT_DIGITS.items()) if d == digits)
        branches.append(f"WHEN lower({{1}}) IN ({codes}) THEN {scaled(digits)}")
    return f"CASE {' '.join(branches)} ELSE {scaled(DEFAULT_DIGITS)} END"


class DecimalText(_RepeatingFunc):
    """PostgreSQL: ``decimal_text`` in SQL, of ``(amount, currency)``: the minor units times
    the currency's ``0.01`` (``0.001``, ...), exact in ``numeric`` and written in exactly
    the currency's digits; NULL stays NULL."""

    sql_template = _decimal_sql()


def decimal_text(minor: int | None, currency: str | None) -> str:
    """``2450, "eur"`` -> ``"24.50"``; ``500, "jpy"`` -> ``"500"``; ``1234, "kwd"`` ->
    ``"1.234"``. Exact integer arithmetic (no float, no Decimal per row); NULL is empty."""
    if minor is None:
        return ""
    digits = minor_unit_digits(currency or "")
    if not digits:
        return str(minor)
    whole, fraction = divmod(abs(minor), 10**digits)
    sign = "-" if minor < 0 else ""
    return f"{sign}{whole}.{fraction:0{digits}d}"


def parse_instant(text: str) -> datetime:
    """An ISO 8601 date-time or date, in UTC unless it names its offset (a date is its UTC
    midnight): ``2026-11-01`` to ``2026-12-01`` is November. ``ValueError`` says what to use."""
    try:
        parsed = parse_datetime(text)
        day = parse_date(text) if parsed is None else None
    except ValueError:  # well formed, but no such date or time (2026-02-30)
        parsed = day = None
    if parsed is None:
        if day is None:
            raise ValueError(
                f"expected an ISO 8601 date or date-time in UTC, e.g. 2026-11-01 or "
                f"2026-11-01T09:30:00Z, not {text[:80]!r}"
            )
        parsed = datetime.combine(day, time.min)
    return parsed.replace(tzinfo=UTC) if timezone.is_naive(parsed) else parsed


@dataclass(frozen=True)
class ExportTable:
    """One export: a model's rows as CSV (module docstring).

    ``columns`` read ``values_list`` paths; an ``AMOUNT`` column reads the same minor units as
    the ``MINOR_UNITS`` column of its ``source`` and the row's ``currency_field``. ``annotations``
    are added to the queryset before reading (values the model has no field for).
    """

    name: str
    model: type[models.Model]
    columns: tuple[Column, ...]
    time_field: str
    ordering: tuple[str, ...]
    currency_field: str = "currency"
    status_field: str = "status"
    annotations: dict[str, Any] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"{self.name}.csv"

    @property
    def codename(self) -> str:
        return f"export_{self.name}"

    @property
    def permission(self) -> str:
        return f"{self.model._meta.app_label}.{self.codename}"

    @property
    def header(self) -> list[str]:
        return [column.name for column in self.columns]

    @property
    def sources(self) -> list[str]:
        """The distinct paths read, in order (an amount reads the minor units' source)."""
        return list(dict.fromkeys([c.source for c in self.columns] + [self.currency_field]))

    def rows(self, filters: ExportFilters, queryset: QuerySet | None = None) -> QuerySet:
        """The rows ``filters`` select (of ``queryset``, default: every row); the values are
        not checked here (``check_filters``)."""
        rows = self.model._default_manager.all() if queryset is None else queryset
        conditions = Q()
        if filters.since is not None:
            conditions &= Q(**{f"{self.time_field}__gte": filters.since})
        if filters.until is not None:
            conditions &= Q(**{f"{self.time_field}__lt": filters.until})
        if filters.statuses:
            conditions &= Q(**{f"{self.status_field}__in": list(filters.statuses)})
        if filters.currency:
            conditions &= Q(**{self.currency_field: filters.currency.lower()})
        return rows.filter(conditions) if conditions else rows

    def check_filters(
        self, filters: ExportFilters, *, option_names: dict[str, str] | None = None
    ) -> None:
        """``InvalidExportFilter`` for a status or currency that names nothing, or an empty
        range, naming the option (``option_names`` maps ``since``, ``until``, ``status`` and
        ``currency`` to the caller's names: ``--status``). Known: the model's status choices
        and ``DJANGO_ORDERS["CURRENCIES"]`` (no query), or a value some row holds (one indexed
        ``EXISTS`` each: a status the provider added later is still exportable)."""
        names = {"since": "since", "until": "until", "status": "status", "currency": "currency"}
        names.update(option_names or {})
        since, until = filters.since, filters.until
        if since is not None and until is not None and since >= until:
            raise InvalidExportFilter(names["until"], "must be later than since")
        choices = getattr(self.model._meta.get_field(self.status_field), "choices", None)
        known_statuses = {str(value) for value, _label in choices or ()}
        for status in filters.statuses:
            if status not in known_statuses and not self._holds(self.status_field, status):
                raise InvalidExportFilter(
                    names["status"],
                    f"no {self.model._meta.verbose_name} has {self.status_field} {status[:80]!r}; "
                    "known: "
                    f"{', '.join(sorted(known_statuses))}",
                )
        if filters.currency:
            code = filters.currency.lower()
            known = tuple(orders_settings.CURRENCIES)
            if code not in known and not self._holds(self.currency_field, code):
                raise InvalidExportFilter(
                    names["currency"],
                    f"no {self.model._meta.verbose_name} has currency "
                    f"{filters.currency[:80]!r}, and it is not one of "
                    f'DJANGO_ORDERS["CURRENCIES"] ({", ".join(known)})',
                )

    def _holds(self, field_name: str, value: str) -> bool:
        return self.model._default_manager.filter(**{field_name: value}).exists()

    def stream(
        self,
        queryset: QuerySet | None = None,
        *,
        chunk_size: int = CHUNK_SIZE,
        counted: Callable[[int], object] | None = None,
    ) -> Iterator[str]:
        """The CSV of ``queryset`` (default: every row), header first, one piece of text per
        chunk of rows (``counted`` is told each piece's number of rows); in ``ordering``
        unless the queryset has an ordering of its own (the admin's changelist). One query
        (two on PostgreSQL outside a transaction: ``SET LOCAL jit = off`` first); closing
        the generator closes its cursor.

        On PostgreSQL every cell is made by the database (``sql_cells``: the escaping, the
        decimal, the times; the psycopg loaders Django installs for timestamps are pure
        Python), and the rows go to the csv writer as they come. They are read in a
        transaction of the export's own: outside one, Django's server-side cursor is ``WITH
        HOLD``, which PostgreSQL runs to the end before the first fetch (a million rows
        materialised before the first byte); inside one, rows flow from the first fetch, and
        the file is one snapshot. In that transaction JIT compilation is off (half a second
        before the first row of a million, for a plan that reads an index in order), and the
        first fetch is ``FIRST_CHUNK_SIZE`` rows. Elsewhere (SQLite) ``converter`` makes the
        cells in Python.
        """
        rows = self.model._default_manager.all() if queryset is None else queryset
        if self.annotations:
            rows = rows.annotate(**self.annotations)
        if not rows.query.order_by:
            rows = rows.order_by(*self.ordering)
        connection = connections[rows.db]
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        writer.writerow(self.header)
        chunks: Generator[list[Any], None, None]
        if connection.vendor == "postgresql":
            chunks = self._database_chunks(rows, connection, chunk_size)
        else:
            chunks = self._converted_chunks(rows, chunk_size)
        try:
            for chunk in chunks:
                writer.writerows(chunk)
                if counted is not None:
                    counted(len(chunk))
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
            if buffer.tell():  # no rows: the header alone
                yield buffer.getvalue()
        finally:
            chunks.close()

    def _database_chunks(
        self, rows: QuerySet, connection: Any, chunk_size: int
    ) -> Generator[list[Any], None, None]:
        """PostgreSQL: lists of rows whose cells the database made (``stream``)."""
        cells = rows.annotate(**self.sql_cells).values_list(*self.sql_cells)
        try:
            sql, params = cells.query.get_compiler(using=rows.db).as_sql()
        except EmptyResultSet:  # a filter that matches nothing by construction (pk__in=[])
            return
        own_transaction = connection.get_autocommit()
        server_side = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
        with transaction.atomic(using=rows.db) if own_transaction else nullcontext():
            if own_transaction:
                with connection.cursor() as settings:
                    settings.execute("SET LOCAL jit = off")
            cursor = connection.chunked_cursor() if server_side else connection.cursor()
            try:
                cursor.execute(sql, params)
                size = min(FIRST_CHUNK_SIZE, chunk_size)
                while True:
                    chunk = cursor.fetchmany(size)
                    if chunk:
                        yield chunk
                    if len(chunk) < size:
                        return
                    size = chunk_size
            finally:
                cursor.close()

    def _converted_chunks(
        self, rows: QuerySet, chunk_size: int
    ) -> Generator[list[Any], None, None]:
        """Elsewhere: lists of rows converted in Python (``converter``); SQLite's cursor
        streams as it is."""
        values: Any = rows.values_list(*self.sources).iterator(chunk_size=chunk_size)
        convert = self.converter
        try:
            while True:
                chunk = list(map(convert, islice(values, chunk_size)))
                if chunk:
                    yield chunk
                if len(chunk) < chunk_size:
                    return
        finally:
            values.close()

    @cached_property
    def sql_cells(self) -> dict[str, Any]:
        """The CSV's cells as PostgreSQL expressions, by annotation name, in column order."""
        made: dict[str, Any] = {}
        for index, column in enumerate(self.columns):
            if column.cell is Cell.TEXT:
                expression: Any = EscapedText(column.source)
            elif column.cell is Cell.TIME:
                expression = UtcIsoText(column.source)
            elif column.cell is Cell.AMOUNT:
                expression = DecimalText(column.source, self.currency_field)
            else:
                expression = F(column.source)
            made[f"export_cell_{index}"] = expression
        return made

    def download(self, queryset: QuerySet) -> StreamingHttpResponse:
        """``queryset`` streamed as the attachment ``<name>.csv`` (the admin's and the API's
        answer). Django closes the response when the client goes, which closes ``stream``."""
        return StreamingHttpResponse(
            self.stream(queryset),
            content_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{self.filename}"'},
        )

    @cached_property
    def converter(self) -> Callable[[tuple[Any, ...]], list[Any]]:
        """A row of ``sources`` -> the CSV cells of ``columns`` (not on PostgreSQL, where the
        database makes them): the per-row work, one function built once a table."""
        position = {source: index for index, source in enumerate(self.sources)}
        currency_at = position[self.currency_field]
        plan = [(position[column.source], column.cell) for column in self.columns]
        text, minor, amount, instant = Cell.TEXT, Cell.MINOR_UNITS, Cell.AMOUNT, Cell.TIME
        starts = FORMULA_STARTS

        def convert(row: tuple[Any, ...]) -> list[Any]:
            cells: list[Any] = []
            append = cells.append
            for index, cell in plan:
                value = row[index]
                if cell is text:
                    if value is None:
                        value = ""
                    elif value.startswith(starts):
                        value = "'" + value
                elif cell is instant:
                    value = utc_iso(value)
                elif cell is amount:
                    value = decimal_text(value, row[currency_at])
                elif cell is minor and value is None:
                    value = ""
                append(value)
            return cells

        return convert


def _order_reference() -> Subquery:
    """The shop's reference (its cart or checkout id) of the request that created the order:
    one indexed lookup on ``order_id`` per row; empty for an order made elsewhere."""
    return Subquery(
        OrderRequest.objects.filter(order_id=OuterRef("pk"), kind=OrderRequest.Kind.ORDER_CREATE)
        .order_by()
        .values("reference")[:1]
    )


ORDERS = ExportTable(
    name="orders",
    model=Order,
    columns=(
        Column("id", "id"),
        Column("number", "number"),
        Column("reference", "export_reference"),
        Column("status", "status"),
        Column("currency", "currency"),
        Column("total_minor", "total", Cell.MINOR_UNITS),
        Column("total", "total", Cell.AMOUNT),
        Column("customer_id", "customer_id"),
        Column("customer_name", "customer__name"),
        Column("customer_email", "customer__email_address"),
        Column("initiated_at", "initiated_at", Cell.TIME),
        Column("paid_at", "paid_at", Cell.TIME),
        Column("completed_at", "completed_at", Cell.TIME),
        Column("canceled_at", "canceled_at", Cell.TIME),
    ),
    time_field="initiated_at",
    # Oldest first, on orders_order_newest_idx read backwards: rows flow from the first fetch.
    ordering=("initiated_at", "id"),
    annotations={"export_reference": _order_reference()},
)

REFUNDS = ExportTable(
    name="refunds",
    model=Refund,
    columns=(
        Column("id", "id"),
        Column("order_id", "order_id"),
        Column("order_number", "order__number"),
        Column("reference", "reference"),
        Column("status", "status"),
        Column("reason", "reason"),
        Column("currency", "currency"),
        Column("total_minor", "total", Cell.MINOR_UNITS),
        Column("total", "total", Cell.AMOUNT),
        Column("created_at", "created_at", Cell.TIME),
        Column("succeeded_at", "succeeded_at", Cell.TIME),
        Column("failed_at", "failed_at", Cell.TIME),
        Column("canceled_at", "canceled_at", Cell.TIME),
        Column("failure_reason", "failure_reason"),
    ),
    time_field="created_at",
    ordering=("created_at", "id"),
)

PAYOUTS = ExportTable(
    name="payouts",
    model=Payout,
    columns=(
        Column("id", "id"),
        Column("reference", "reference"),
        Column("status", "status"),
        Column("currency", "currency"),
        Column("amount_minor", "amount", Cell.MINOR_UNITS),
        Column("amount", "amount", Cell.AMOUNT),
        Column("debit_transaction_id", "debit_transaction_id"),
        Column("initiated_at", "initiated_at", Cell.TIME),
        Column("expected_at", "expected_at", Cell.TIME),
        Column("sent_at", "sent_at", Cell.TIME),
        Column("succeeded_at", "succeeded_at", Cell.TIME),
        Column("failed_at", "failed_at", Cell.TIME),
        Column("canceled_at", "canceled_at", Cell.TIME),
        Column("failure_reason", "failure_reason"),
    ),
    time_field="initiated_at",
    # Oldest first, on orders_payout_newest_idx read backwards.
    ordering=("initiated_at", "id"),
)

BALANCE_TRANSACTIONS = ExportTable(
    name="balance_transactions",
    model=BalanceTransaction,
    columns=(
        Column("id", "id"),
        Column("type", "type"),
        Column("currency", "currency"),
        Column("amount_minor", "amount", Cell.MINOR_UNITS),
        Column("amount", "amount", Cell.AMOUNT),
        # The ids as the transaction names them (kept while the mirror lacks the order or
        # refund: then its number or reference is empty).
        Column("order_id", "order_id"),
        Column("order_number", "order__number"),
        Column("refund_id", "refund_id"),
        Column("refund_reference", "refund__reference"),
        Column("payment_id", "payment_id"),
        Column("payout_id", "payout_id"),
        Column("available_minor", "available_amount", Cell.MINOR_UNITS),
        Column("available", "available_amount", Cell.AMOUNT),
        Column("pending_minor", "pending_amount", Cell.MINOR_UNITS),
        Column("pending", "pending_amount", Cell.AMOUNT),
        Column("spent_minor", "spent_amount", Cell.MINOR_UNITS),
        Column("spent", "spent_amount", Cell.AMOUNT),
        Column("created_at", "created_at", Cell.TIME),
        Column("available_at", "available_at", Cell.TIME),
    ),
    time_field="created_at",
    # Oldest first, on orders_txn_newest_idx read backwards.
    ordering=("created_at", "id"),
    # A transaction has a type, not a status: --status payment selects the payments.
    status_field="type",
)

#: Every export by name: the commands' and the REST routes' ``<name>``.
EXPORTS: dict[str, ExportTable] = {
    table.name: table for table in (ORDERS, REFUNDS, PAYOUTS, BALANCE_TRANSACTIONS)
}
