"""What every django-orders admin shares: read-only pages, cheap counts, readable values.

The mirror belongs to the upstream service and the request records to the services that write
them, so no admin page adds, edits or deletes a row, whoever the user is (superusers included).
The only writes are the explicit actions, and each runs through ``django_orders.services``
under its own permission check (``has_<name>_permission``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.db import transaction
from django.db.models import TextField
from django.db.models.functions import Cast
from django.http import HttpRequest
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..answers import MAX_JSON_DEPTH, nesting_depth_exceeds
from ..paginators import EstimatedCountPaginator
from .search import bounded_search_term

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
    if not isinstance(text, str) or nesting_depth_exceeds(text, MAX_JSON_DEPTH):
        return format_html('<pre class="orders-json">{}</pre>', text)
    try:
        return pretty_json(json.loads(text))
    except (TypeError, ValueError, RecursionError):
        return format_html('<pre class="orders-json">{}</pre>', text)


def bounded_json(text: str | None) -> Any:
    """Stored JSON text decoded, or ``{}`` when it is not JSON or nests deeper than the client
    accepts (see ``pretty_json_text``)."""
    if not isinstance(text, str) or nesting_depth_exceeds(text, MAX_JSON_DEPTH):
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


def local_datetime(value: datetime | None) -> str:
    """A timestamp as the admin shows it elsewhere (local time, DATETIME_FORMAT)."""
    if value is None:
        return "-"
    return formats.date_format(timezone.localtime(value), "DATETIME_FORMAT")


def compact_datetime(value: datetime | None) -> SafeString | str:
    """A list-column timestamp: short (local ``YYYY-MM-DD HH:MM``), unbroken, full on hover.

    Django's long default ("May 2, 2026, 8:04 a.m.") pushes the last columns of a wide
    changelist off the screen.
    """
    if value is None:
        return "-"
    local = timezone.localtime(value)
    return format_html(
        '<span style="white-space:nowrap" title="{}">{}</span>',
        formats.date_format(local, "DATETIME_FORMAT"),
        local.strftime("%Y-%m-%d %H:%M"),
    )


def has_model_permission(request: HttpRequest, model: type, action: str) -> bool:
    """The real ``<app>.<action>_<model>`` permission, which ``has_change_permission`` hides."""
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """View-only for everybody; counts that stay cheap on large tables."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    # Facet counts ("Show counts") run one COUNT per filter choice over the whole table.
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100
    list_max_show_all = 200

    # The actions call the service over HTTP and create_order's rules forbid an outer
    # transaction around that (a rollback would erase an idempotency key that the service has
    # seen), so with ATOMIC_REQUESTS = True the changelist, where actions run, stays outside one.
    @transaction.non_atomic_requests
    def changelist_view(self, request: HttpRequest, extra_context: Any = None):
        return super().changelist_view(request, extra_context)

    def get_search_results(self, request: HttpRequest, queryset, search_term: str):
        return super().get_search_results(request, queryset, bounded_search_term(search_term))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
