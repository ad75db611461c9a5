"""``manage.py prune_order_events``: the order timeline's retention.

The timeline (``OrderEvent``) only grows; run this on a schedule (cron, a Kubernetes CronJob)
to delete the entries older than a number of days. Orders, refunds and requests are not
touched: only their history beyond the cut-off goes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_orders.services import prune_order_events

from ..base import whole_number

#: Days kept when ``--older-than`` is not given.
DEFAULT_DAYS = 365
#: The longest retention accepted (a larger number is surely a typo; 100 years).
MAX_DAYS = 36500


class Command(BaseCommand):
    help = (
        "Delete the entries of the orders' timelines (OrderEvent) recorded more than "
        f"--older-than days ago (default: {DEFAULT_DAYS}), in batches that commit one by one. "
        "Orders, refunds and order requests are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=whole_number(1, MAX_DAYS),
            default=DEFAULT_DAYS,
            metavar="DAYS",
            help=(
                "Delete the entries recorded more than this many days ago, a whole number "
                f"from 1 to {MAX_DAYS} (default: {DEFAULT_DAYS})."
            ),
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            default=False,
            help="Count the entries that would be deleted; delete nothing (default: off).",
        )

    def handle(
        self, *args: Any, older_than: int = DEFAULT_DAYS, dry_run: bool = False, **options
    ) -> None:
        try:
            count = prune_order_events(timedelta(days=older_than), dry_run=dry_run)
        except ValueError as exc:
            raise CommandError(f"--older-than: {exc}") from None
        if dry_run:
            self.stdout.write(
                f"dry run: {count:,} timeline entries older than {older_than} days would be deleted"
            )
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Deleted {count:,} timeline entries older than {older_than} days."
                )
            )
