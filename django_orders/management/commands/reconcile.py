"""``manage.py reconcile``: did the money arrive? Compares the mirror's orders and refunds with
its payouts, balance transactions and balance snapshot (the database only: run the syncs of
those resources first), records each discrepancy, and says what it found.

Exit status: 0; 1 with ``--fail-on-discrepancy`` when discrepancies are open in the range
("cannot verify" is not one); 2 for a bad option. What each kind means: docs/reconciliation.md.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_orders.services import reconcile

from ..base import utc_instant


class Command(BaseCommand):
    help = (
        "Reconcile the mirror's orders and refunds with its payouts, balance transactions and "
        "balance snapshot (the database only), record the discrepancies and print the counts. "
        "Exit status 1 with --fail-on-discrepancy when some are open in the range."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since",
            type=utc_instant,
            default=None,
            metavar="DATE",
            help=(
                "Only what happened at or after this date (YYYY-MM-DD, midnight UTC) or ISO "
                "8601 time (default: no lower bound)."
            ),
        )
        parser.add_argument(
            "--until",
            type=utc_instant,
            default=None,
            metavar="DATE",
            help="Only what happened before this date or time, UTC (default: no upper bound).",
        )
        parser.add_argument(
            "--fail-on-discrepancy",
            action="store_true",
            default=False,
            help="Exit with status 1 when discrepancies are open in the range (default: off).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since, until = options.get("since"), options.get("until")
        try:
            run = reconcile(since=since, until=until)
        except ValueError as exc:
            raise CommandError(f"--since/--until: {exc}", returncode=2) from None
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(run.open_by_kind.items()))
        self.stdout.write(
            f"{run.open} open discrepancies ({run.new} new, {run.resolved} resolved this run)"
            + (f": {kinds}" if kinds else "")
        )
        if run.cannot_verify:
            reasons = ", ".join(
                f"{reason} {count}" for reason, count in sorted(run.cannot_verify_by_reason.items())
            )
            self.stdout.write(
                self.style.WARNING(
                    f"{run.cannot_verify} could not be verified yet ({reasons}): the syncs of "
                    "balance transactions, payouts, orders and refunds have not reached them."
                )
            )
        if run.open and options.get("fail_on_discrepancy"):
            raise CommandError(
                f"{run.open} discrepancies open: see Discrepancies in the admin.", returncode=1
            )
