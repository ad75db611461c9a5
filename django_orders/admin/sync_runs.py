"""The history of sync runs, read-only: what each walk saw, wrote and why it stopped."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from ..models import SyncRun
from .base import ReadOnlyModelAdmin, badge, compact_datetime, grouped_number

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise

#: The most of a run's error the list shows (all of it on hover and on the run's page).
ERROR_SHOWN = 300

#: ``SyncRun.end_reason`` as staff read it.
WALK_ENDS = {
    "last_page": _("the last page"),
    "max_pages": _("the --max-pages limit"),
    "page_window": _("the provider's page window"),
}


def _count_column(field: str, label: StrOrPromise) -> Callable[[SyncRun], str]:
    """A list column of one count, with thousands separators (a walk sees millions of records),
    under a short header: the model's verbose names would push the last columns off the screen."""

    @admin.display(description=label)
    def column(obj: SyncRun) -> str:
        return grouped_number(getattr(obj, field))

    column.__name__ = f"{field}_column"  # the cells' CSS class, column-<name>
    return column


COUNT_COLUMNS = (
    _count_column("pages", _("pages")),
    _count_column("seen", _("seen")),
    _count_column("created", _("created")),
    _count_column("updated", _("updated")),
    _count_column("unchanged", _("unchanged")),
    _count_column("refreshed", _("refreshed")),
)


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyModelAdmin):
    # What went wrong first: on a narrow screen the counters are the columns that scroll away.
    list_display = (
        "started_column",
        "resource",
        "outcome_column",
        "end_column",
        "error_column",
        "duration_column",
        *COUNT_COLUMNS,
        "index_column",
    )
    # Fixed-choice and date filters only: a free-text column would cost a DISTINCT scan.
    list_filter = ("outcome", "started_at")
    ordering = ("-started_at", "-id")
    sortable_by = ("started_column",)
    actions = None
    fields = (
        "resource",
        "outcome_column",
        "started_at",
        "finished_at",
        "duration_column",
        "host",
        "page_size",
        "pages",
        "seen",
        "created",
        "updated",
        "unchanged",
        "refreshed",
        "refresh_waiting",
        "refunds_refreshed",
        "refunds_changed",
        "refunds_waiting",
        "end_column",
        "index_column",
        "warning",
        "watermark_before",
        "watermark_after",
        "feed_read",
        "feed_lookups",
        "standing_column",
        "rate_limited",
        "rate_held",
        "error",
        "skipped",
        "problems",
    )
    readonly_fields = fields
    # The counts, on the detail page as in the list: with thousands separators.
    grouped_fields = (
        "pages",
        "seen",
        "created",
        "updated",
        "unchanged",
        "refreshed",
        "refresh_waiting",
        "feed_read",
        "feed_lookups",
        "refunds_refreshed",
        "refunds_changed",
        "refunds_waiting",
        "rate_limited",
        "skipped",
    )

    @admin.display(description=_("started"), ordering="started_at")
    def started_column(self, obj: SyncRun) -> SafeString | str:
        return compact_datetime(obj.started_at)

    @admin.display(description=_("outcome"), ordering="outcome")
    def outcome_column(self, obj: SyncRun) -> SafeString:
        return badge(obj.outcome, obj.get_outcome_display())

    @admin.display(description=_("walk ended by"))
    def end_column(self, obj: SyncRun) -> str:
        """The stored code (``page_window``...) in words; an unknown code as it is."""
        return str(WALK_ENDS.get(obj.end_reason, obj.end_reason or "-"))

    @admin.display(description=_("search index"))
    def index_column(self, obj: SyncRun) -> SafeString | str:
        """The index's freshness as the change feed read it; a warning's text on hover."""
        if not obj.index_freshness:
            return "-"
        if obj.warning:
            return format_html('<span title="{}">{} ⚠</span>', obj.warning, obj.index_freshness)
        return obj.index_freshness

    @admin.display(description=_("service and mirror"))
    def standing_column(self, obj: SyncRun) -> str:
        return obj.standing or "-"

    @admin.display(description=_("duration"))
    def duration_column(self, obj: SyncRun) -> str:
        duration = obj.duration
        if duration is None:
            return "-"
        seconds = duration.total_seconds()
        if seconds < 60:
            return f"{seconds:.1f} s"
        minutes, seconds = divmod(round(seconds), 60)
        return f"{minutes} min {seconds:02d} s"

    @admin.display(description=_("error"))
    def error_column(self, obj: SyncRun) -> SafeString | str:
        """The error, up to ``ERROR_SHOWN`` characters; all of it on hover and on its page."""
        if not obj.error:
            return "-"
        # Wrapped in a bounded width rather than cut short: errors say where and why in one
        # sentence ("CouldNotConnect: POST /orders/page: could not connect (...)"), and the
        # cause comes last.
        return format_html(
            '<span style="display:inline-block;min-width:24em;max-width:40em" title="{}">{}</span>',
            obj.error,
            Truncator(obj.error).chars(ERROR_SHOWN),
        )
