"""What every django-orders admin shares: read-only pages, cheap counts, readable values.

The mirror belongs to the upstream service and the request records to the services that write
them, so no admin page adds, edits or deletes a row, whoever the user is (superusers included).
The only writes are the explicit actions, and each runs through ``django_orders.services``
under its own permission check (``has_<name>_permission``).

Cheap at a million rows (docs/architecture/interfaces.md, "Counting rows"):

- ``EstimatedCountPaginator`` never counts millions of rows exactly: ``SELECT COUNT(*)`` is a
  full scan on PostgreSQL, so an unfiltered large table is counted from the planner's estimate
  and anything else exactly up to ``count_limit`` rows; ``count_is_exact`` tells templates
  whether to say "about" or "more than".
- ``PeriodProbingQuerySet.datetimes``, the date hierarchy, reads the first and last value,
  lists the periods between them in Python and asks one ``EXISTS`` per period: two queries
  whatever the number of rows, where Django's ``SELECT DISTINCT date_trunc(...)`` reads every
  row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.auth import get_permission_codename
from django.core.paginator import Paginator
from django.db import connections, models
from django.db.models import Exists, Max, Min, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from ..db import non_atomic_requests
from ..display import local_datetime
from ..exports import ExportTable
from ..mirror.queries import bounded_search_term, nests_too_deep
from ..models import Order

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise


class EstimatedCountPaginator(Paginator):
    """``count`` is exact below ``count_limit`` rows, an estimate or a lower bound above it."""

    #: Counting stops here; the admin then shows "more than N" and the last reachable page is
    #: ``count_limit / per_page``. Filters and the date hierarchy narrow further.
    count_limit = 10_000

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: "exact", "estimate" (planner statistics) or "at_least" (counting stopped at the limit)
        self.count_kind = "exact"

    @property
    def count_is_exact(self) -> bool:
        self.count  # noqa: B018  (the kind is known once the count is)
        return self.count_kind == "exact"

    @cached_property
    def count(self) -> int:
        object_list = self.object_list
        if not isinstance(object_list, QuerySet):
            return super().count
        estimate = self._table_estimate(object_list)
        if estimate is not None and estimate > self.count_limit:
            self.count_kind = "estimate"
            return estimate
        counted = object_list.order_by()[: self.count_limit + 1].count()
        if counted > self.count_limit:
            self.count_kind = "at_least"
            return self.count_limit
        return counted

    def _table_estimate(self, queryset: QuerySet) -> int | None:
        """The planner's row estimate for an unfiltered queryset on PostgreSQL, else ``None``."""
        query = queryset.query
        if query.where or query.is_sliced or query.distinct or query.combinator:
            return None
        connection = connections[queryset.db]
        if connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
                [connection.ops.quote_name(queryset.model._meta.db_table)],
            )
            row = cursor.fetchone()
        # reltuples is -1 (PostgreSQL 14+) or 0 for a table never analysed: count instead.
        if row is None or row[0] is None or row[0] <= 0:
            return None
        return int(row[0])


# (background, text) per known value; anything else is shown as it is, in neutral colours.
BADGE_COLOURS: dict[str, tuple[str, str]] = {
    "preparing": ("#e0ecf8", "#174a7c"),
    "requires_payment": ("#fff1cc", "#6b4a00"),
    "paid": ("#d8f0dc", "#1d5c2a"),
    "completed": ("#1d7a3a", "#ffffff"),
    "canceled": ("#f6d8d8", "#7c1d1d"),
    "expired": ("#e4e4e4", "#444444"),
    "unknown": ("#ece4f6", "#4b2a72"),
    # order request states and sync outcomes
    "pending": ("#fff1cc", "#6b4a00"),
    "succeeded": ("#d8f0dc", "#1d5c2a"),
    "failed": ("#f6d8d8", "#7c1d1d"),
    "needs_review": ("#ffd9b3", "#6b3300"),
    "running": ("#e0ecf8", "#174a7c"),
    # document deliveries ("unknown", above, is a send with no answer)
    "delivered": ("#d8f0dc", "#1d5c2a"),
    "partly_delivered": ("#fff1cc", "#6b4a00"),
    "not_delivered": ("#f6d8d8", "#7c1d1d"),
}

NEUTRAL_BADGE = ("#f0f0f0", "#333333")


def badge(value: str, label: str | None = None) -> SafeString:
    """A coloured, escaped label; an unknown value is shown as it is (never hidden)."""
    background, colour = BADGE_COLOURS.get(value, NEUTRAL_BADGE)
    return format_html(
        '<span class="orders-badge orders-badge-{}" title="{}" style="display:inline-block;'
        "padding:1px 8px;border-radius:10px;font-size:11px;font-weight:600;"
        'white-space:nowrap;background:{};color:{}">{}</span>',
        value if value in BADGE_COLOURS else "other",
        value,
        background,
        colour,
        label if label is not None else value,
    )


def status_badge(order: Order) -> SafeString:
    # get_status_display() falls back to the stored value for a status the choices lack.
    return badge(order.status, order.get_status_display())


def pretty_json(value: Any) -> SafeString:
    """A JSON value indented and escaped inside ``<pre>``: raw records hold arbitrary text."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html(
        '<pre class="orders-json" style="white-space:pre-wrap;word-break:break-all;'
        'max-height:40em;overflow:auto;margin:0">{}</pre>',
        text,
    )


def pretty_json_text(text: str) -> SafeString:
    """Stored JSON text pretty-printed; text that is not JSON, or nested deeper than the
    client accepts (a row stored before that limit, or by hand), is shown escaped as it is:
    decoding and indenting such text recurses once a level, and a page must not fail on it."""
    if not isinstance(text, str) or nests_too_deep(text):
        return format_html('<pre class="orders-json">{}</pre>', text)
    try:
        return pretty_json(json.loads(text))
    except (TypeError, ValueError, RecursionError):
        return format_html('<pre class="orders-json">{}</pre>', text)


def bounded_json(text: str | None) -> Any:
    """Stored JSON text decoded, or ``{}`` when it is not JSON or nests deeper than the client
    accepts (see ``pretty_json_text``)."""
    if not isinstance(text, str) or nests_too_deep(text):
        return {}
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return {}


def raw_as_text() -> Cast:
    """The ``raw`` column as its stored text, for detail pages: the admin never decodes
    ``raw`` through the model field (``JSONField`` would, on loading the row), so a record
    nested very deep is shown as text rather than failing the page."""
    return Cast("raw", output_field=TextField())


def compact_datetime(value: datetime | None) -> SafeString | str:
    """A list-column timestamp: to the minute with the zone, unbroken, seconds on hover."""
    if value is None:
        return "-"
    return format_html(
        '<span style="white-space:nowrap" title="{}">{}</span>',
        local_datetime(value),
        local_datetime(value, seconds=False),
    )


def grouped_number(value: int | None) -> str:
    """A count with the active locale's thousands separators: ``1,234,567`` in English.

    What ``django.contrib.humanize``'s ``intcomma`` gives, without needing that app installed.
    Django's own display of an integer groups digits only when ``USE_THOUSAND_SEPARATOR`` is
    on (it is off by default), so counts in the millions would read as ``1234567``.
    """
    if value is None:
        return "-"
    return number_format(value, force_grouping=True)


def _field_display(name: str, label: Any, render: Callable[[Any], str]) -> Any:
    """A detail-page display of the model field ``name``, its value passed through ``render``."""

    def display(obj: models.Model) -> str:
        return render(getattr(obj, name))

    display.short_description = label  # type: ignore[attr-defined]
    return display


def at_most(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    rows: Any,
    limit: int,
    refusal: StrOrPromise,
) -> list[Any] | None:
    """The rows a staff action was given, in one query, or ``None`` when there are more than
    ``limit``: then ``refusal`` (with ``%(limit)d``) is shown as an error and nothing is done.
    Each action sends or writes something per row, so it is bounded, and reading one row past
    the limit is how it knows."""
    selected = list(rows[: limit + 1])
    if len(selected) > limit:
        model_admin.message_user(request, refusal % {"limit": limit}, messages.ERROR)
        return None
    return selected


def action_confirmation(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    *,
    title: Any,
    action_name: str,
    template: str,
    **extra: Any,
) -> TemplateResponse:
    """The intermediate page of a bulk action (as Django's delete confirmation): the admin's
    context, ``extra`` on top, rendered from the model's ``admin/<app>/<model>/<template>``."""
    opts = model_admin.model._meta
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "subtitle": None,
        "opts": opts,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "action_name": action_name,
        "media": model_admin.media,
        **extra,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(
        request, f"admin/{opts.app_label}/{opts.model_name}/{template}", context
    )


def has_model_permission(request: HttpRequest, model: type[models.Model], action: str) -> bool:
    """The real ``<app>.<action>_<model>`` permission, which ``has_change_permission`` hides."""
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")


def names_nothing(object_id: str) -> bool:
    """An object id of a URL that holds a NUL (``%00``): no id does, and PostgreSQL refuses
    one in a query (a 500), so the admin answers as for any missing object."""
    return "\x00" in str(object_id)


if TYPE_CHECKING:
    # What the mixin is mixed into, so mypy knows the ModelAdmin it is part of.
    _AdminBase = admin.ModelAdmin
else:
    _AdminBase = object


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """View-only for everybody; counts that stay cheap on large tables."""

    #: Integer fields shown on detail pages with thousands separators (``grouped_number``).
    grouped_fields: tuple[str, ...] = ()

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    # Facet counts ("Show counts") run one COUNT per filter choice over the whole table.
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100
    list_max_show_all = 200

    # The actions call the service over HTTP and create_order's rules forbid an outer
    # transaction around that (a rollback would erase an idempotency key that the service has
    # seen), so with ATOMIC_REQUESTS = True the changelist, where actions run, stays outside one.
    @non_atomic_requests
    def changelist_view(self, request: HttpRequest, extra_context: Any = None):
        return super().changelist_view(request, extra_context)

    def __init__(self, model: type[models.Model], admin_site: admin.AdminSite) -> None:
        super().__init__(model, admin_site)
        # Detail pages show each DateTimeField through a display in local_datetime form (a
        # readonly model field would be rendered with DATETIME_FORMAT instead), and the
        # grouped_fields through grouped_number.
        self._shown_as: dict[str, str] = {}
        self._shown_help: dict[str, Any] = {}
        for field in model._meta.fields:
            if isinstance(field, models.DateTimeField):
                self._show_through(field, "local", local_datetime)
            elif field.name in self.grouped_fields:
                self._show_through(field, "grouped", grouped_number)

    def _show_through(self, field: models.Field, suffix: str, render: Callable[[Any], str]) -> None:
        shown = f"{field.name}_{suffix}"
        self._shown_as[field.name] = shown
        setattr(self, shown, _field_display(field.name, field.verbose_name, render))
        if field.help_text:
            self._shown_help[shown] = field.help_text

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        # A display is not a model field, so the admin finds no help text for it (it looks one
        # up by the model field's name). The form's Meta.help_texts is where it looks first, so
        # the field's own help text is put there, under the display's name.
        kwargs["help_texts"] = {**self._shown_help, **(kwargs.get("help_texts") or {})}
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        return [
            (title, {**options, "fields": self._timestamps_shown(options["fields"])})
            for title, options in super().get_fieldsets(request, obj)
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self._timestamps_shown(super().get_readonly_fields(request, obj))

    def _timestamps_shown(self, names: Any) -> list[Any]:
        return [
            self._timestamps_shown(name)
            if isinstance(name, list | tuple)
            else self._shown_as.get(name, name)
            for name in names
        ]

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        # A search or filter value holding a NUL (``%00``) matches nothing, and PostgreSQL
        # refuses one in a query (a 500): the admin's answer to a filter it cannot apply.
        if any("\x00" in value for _name, values in request.GET.lists() for value in values):
            raise IncorrectLookupParameters("A NUL character in a search or filter value.")
        return super().get_changelist_instance(request)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None):
        if names_nothing(object_id):
            return None
        return super().get_object(request, object_id, from_field)

    def get_search_results(self, request: HttpRequest, queryset, search_term: str):
        return super().get_search_results(request, queryset, bounded_search_term(search_term))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ExportCSVMixin(_AdminBase):
    """The "Export CSV" action (``django_orders.exports``), behind the table's permission.

    It exports the rows it is given: the ticked ones, or with Django's "select all" the whole
    changelist as filtered and searched, however large (one streamed query, in the
    changelist's order). Add ``"export_csv"`` to ``actions`` and set ``export_table``.
    """

    export_table: ExportTable

    def has_export_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(self.export_table.permission)

    @admin.action(description=_("Export CSV"), permissions=["export"])
    def export_csv(self, request: HttpRequest, queryset) -> StreamingHttpResponse:
        return self.export_table.download(queryset)


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
