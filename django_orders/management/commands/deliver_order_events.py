"""``manage.py deliver_order_events [--once]``: the webhook runner (docs/events.md).

Run it as a long-lived process (a systemd unit, a Kubernetes Deployment), on as many hosts as
needed: runners claim deliveries in the database, never the same one twice at once. ``--once``
delivers what is due and exits, for cron.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_orders.services import deliver_order_events

from ..base import whole_number

DEFAULT_BATCH = 100
DEFAULT_IDLE = 1


class Command(BaseCommand):
    help = (
        "Deliver the due webhook and EVENT_RECEIVERS deliveries, in batches; for ever (sleeping "
        f"--idle seconds, default {DEFAULT_IDLE}, when nothing is due) or, with --once, until "
        "nothing is due."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once",
            action="store_true",
            default=False,
            help="Deliver what is due, then exit (default: run until stopped).",
        )
        parser.add_argument(
            "--batch",
            type=whole_number(1, 1000),
            default=DEFAULT_BATCH,
            help=f"Deliveries claimed at a time, 1 to 1000 (default: {DEFAULT_BATCH}).",
        )
        parser.add_argument(
            "--idle",
            type=whole_number(1, 3600),
            default=DEFAULT_IDLE,
            metavar="SECONDS",
            help=f"Pause when nothing is due, 1 to 3600 s (default: {DEFAULT_IDLE}).",
        )

    def handle(
        self,
        *args: Any,
        once: bool = False,
        batch: int = DEFAULT_BATCH,
        idle: int = DEFAULT_IDLE,
        **options: Any,
    ) -> None:
        try:
            run = deliver_order_events(once=once, batch=batch, idle=float(idle))
        except KeyboardInterrupt:
            raise CommandError("Stopped.", returncode=130) from None
        self.stdout.write(
            f"Claimed {run.claimed:,}: {run.delivered:,} delivered, {run.failed:,} to retry, "
            f"{run.dead:,} dead; endpoints disabled by 410: {len(run.disabled)}."
        )
