"""The history of sync runs, read-only: what each walk saw, wrote and why it stopped."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from ..models import SyncRun
from .base import ReadOnlyModelAdmin, badge, compact_datetime


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyModelAdmin):
    # What went wrong first: on a narrow screen the counters are the columns that scroll away.
    list_display = (
        "started_column",
        "resource",
        "outcome_column",
        "end_reason",
        "error_column",
        "duration_column",
        "pages",
        "seen_column",
        "created",
        "updated",
        "unchanged",
        "refreshed_column",
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
        "end_reason",
        "error",
        "skipped",
        "problems",
    )
    readonly_fields = fields

    @admin.display(description=_("started"), ordering="started_at")
    def started_column(self, obj: SyncRun) -> SafeString | str:
        return compact_datetime(obj.started_at)

    @admin.display(description=_("outcome"), ordering="outcome")
    def outcome_column(self, obj: SyncRun) -> SafeString:
        return badge(obj.outcome, obj.get_outcome_display())

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

    # Short headers: the model's verbose names would push the last columns off the screen.
    @admin.display(description=_("seen"))
    def seen_column(self, obj: SyncRun) -> int:
        return obj.seen

    @admin.display(description=_("refreshed"))
    def refreshed_column(self, obj: SyncRun) -> int:
        return obj.refreshed

    @admin.display(description=_("error"))
    def error_column(self, obj: SyncRun) -> SafeString | str:
        """The start of the error; all of it on hover and on the run's page."""
        if not obj.error:
            return "-"
        return format_html('<span title="{}">{}</span>', obj.error, Truncator(obj.error).chars(60))
