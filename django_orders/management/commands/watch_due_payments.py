"""``manage.py watch_due_payments [--every SECONDS]``: run every payment watch that is due or
was abandoned (docs/operations.md, "Background tasks: cron or tasks").

The ``watch_payment`` task a step enqueues runs it on time; this sweep carries what no task
will: a step whose worker was killed, a first step whose enqueue was lost, a deferred job a
backend never runs. From cron once a minute, or as a long-lived process with ``--every``; on
several hosts at once if you like: watches are claimed in the database.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_orders.services import WatchSweep, watch_due_payments

from ..base import whole_number


class Command(BaseCommand):
    help = (
        "Read the change feed for the open payment watches (WATCH_FEED_INTERVAL), then claim "
        "the watches whose next lookup is due or whose claim expired, in batches, and run "
        "their step; once (default, for cron) or, with --every, again and again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--every",
            type=whole_number(1, 3600),
            default=None,
            metavar="SECONDS",
            help="Sweep again this many seconds after each sweep, 1 to 3600, until stopped "
            "(default: sweep once and exit).",
        )

    def handle(self, *args: Any, every: int | None = None, **options: Any) -> None:
        try:
            while True:
                self._report(watch_due_payments(), quiet_when_idle=every is not None)
                if every is None:
                    return
                time.sleep(every)
        except KeyboardInterrupt:
            raise CommandError("Stopped.", returncode=130) from None

    def _report(self, sweep: WatchSweep, *, quiet_when_idle: bool) -> None:
        # A loop says nothing of its idle sweeps (a line every few seconds buries the log).
        feed = sweep.feed
        if sweep.claimed or (feed and feed.changed) or not quiet_when_idle:
            self.stdout.write(
                f"Payment watches: {sweep.claimed:,} step(s) run, {sweep.ended:,} watch(es) ended."
            )
        if feed and feed.searches and (feed.changed or feed.problem or not quiet_when_idle):
            self.stdout.write(
                f"The change feed: {feed.changed:,} changed order(s) looked up, "
                f"{feed.ended:,} watch(es) ended."
            )
        if feed and feed.problem:
            self.stderr.write(f"The change feed is not used ({feed.problem}): the watches poll.")
