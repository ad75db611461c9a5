"""``manage.py resume_order_requests``: resend pending order requests with their own keys.

Run it on a schedule (cron, a Kubernetes CronJob), on several hosts at once if you like: each
request is claimed before it is sent. It exits non-zero when a request failed or needs review,
so the scheduler's alerting tells staff to look at the admin.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.translation import ngettext

from django_orders.exceptions import OrdersError
from django_orders.services import ResumeSummary, resume_order_requests

from ..base import whole_number


class Command(BaseCommand):
    help = (
        "Resend pending order requests whose backoff has passed, each with its own idempotency "
        "key and stored payload, and record the outcome. Requests older than KEY_LIFETIME are "
        "never resent: they are marked 'needs review'. Exits with status 1 when any request "
        "failed or needs review."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            default=False,
            help="List the requests that would be resent; send and change nothing (default: off).",
        )
        parser.add_argument(
            "--limit",
            type=whole_number(1),
            default=None,
            help="Resend at most this many requests in this run (default: no limit).",
        )

    def handle(self, *args: Any, dry_run: bool = False, limit: int | None = None, **options):
        try:
            summary = resume_order_requests(dry_run=dry_run, limit=limit)
        except (OrdersError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if summary.dry_run:
            for request in summary.would_resend:
                self.stdout.write(
                    f"would resend {request.pk} reference={request.reference or '-'} "
                    f"key={request.idempotency_key} attempts={request.attempts} "
                    f"created={request.created_at:%Y-%m-%d %H:%M:%S}"
                )
            self.stdout.write(
                f"dry run: {len(summary.would_resend):,} would be resent, "
                f"{summary.needs_review:,} would be marked needs review (too old to resend)"
                f"{waiting(summary)}"
            )
            return
        line = (
            f"resent {summary.resent:,}, succeeded {summary.succeeded:,}, "
            f"still pending {summary.still_pending:,}, failed {summary.failed:,}, "
            f"needs review {summary.needs_review:,}{waiting(summary)}"
        )
        if summary.stopped_by is not None:
            raise CommandError(f"{line}. Stopped: {summary.stopped_by}")
        if summary.failed or summary.needs_review:
            raise CommandError(f"{line}. Look at these order requests in the admin.")
        self.stdout.write(self.style.SUCCESS(line))


def waiting(summary: ResumeSummary) -> str:
    """``; N waiting for their backoff, the next due at ... (in ...)``, or nothing."""
    if not summary.waiting or summary.next_due_at is None:
        return ""
    due = summary.next_due_at.astimezone(UTC)
    seconds = max(0, round((due - timezone.now()).total_seconds()))
    after = f"{seconds:,} seconds" if seconds < 120 else f"{round(seconds / 60):,} minutes"
    count = ngettext(
        "%(count)s request waiting for its backoff",
        "%(count)s requests waiting for their backoff",
        summary.waiting,
    ) % {"count": f"{summary.waiting:,}"}
    return f"; {count}, the next due at {due:%Y-%m-%d %H:%M:%S} UTC (in {after})"
