"""``manage.py sync_orders``: walk a ``/page`` resource into the local mirror."""

from __future__ import annotations

import time
from argparse import ArgumentTypeError
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from django_orders.conf import DEFAULTS, MAX_PAGE_SIZE
from django_orders.exceptions import AuthenticationFailed, OrdersError, SyncAlreadyRunning
from django_orders.models import SyncRun
from django_orders.services import COLLECTIONS, RESOURCE_NAME, RESOURCES, sync_orders

from ..base import whole_number

#: The resources --backfill reads through their search index (the registry's).
BACKFILLED = sorted(name for name, kind in RESOURCES.items() if kind.backfilled)
EXIT_FAILED = 1
EXIT_LEASE_HELD = 3
EXIT_AUTH_FAILED = 4
#: Off a terminal (cron, a container's log) at verbosity 1, a plain progress line every this many
#: pages: a log line per page of a long walk would bury everything else.
PLAIN_PROGRESS_EVERY = 10


def resource_name(value: str) -> str:
    """An argparse type: a resource name as it may appear in the URL path."""
    if not RESOURCE_NAME.fullmatch(value):
        shown = value[:80] + "..." if len(value) > 80 else value
        raise ArgumentTypeError(
            "expected a name of at most 64 lower-case letters, digits and underscores, "
            f"not {shown!r}"
        )
    return value


class ProgressDisplay:
    """Pages, records and records per second: rewritten in place on a terminal, plain lines
    otherwise (every ``PLAIN_PROGRESS_EVERY``th page at verbosity 1, every page and lookup at
    verbosity 2+). A backfill's "done / at least N" likewise, per search answer: the first and
    every ``PLAIN_PROGRESS_EVERY``th after it at verbosity 1."""

    def __init__(self, stdout: OutputWrapper, verbosity: int) -> None:
        self.stdout = stdout
        self.verbosity = verbosity
        self.tty = stdout.isatty()
        self.started = time.monotonic()
        self.last_pages = 0
        self.answers = 0  # a backfill's search answers
        self.width = 0

    def __call__(self, run: SyncRun) -> None:
        if self.verbosity < 1:
            return
        elapsed = max(time.monotonic() - self.started, 1e-6)
        if run.end_reason == "backfill":
            self.answers += 1
            text = f"{run.resource} backfill: {backfill_done(run)}"
            self._show(text, new_step=self.answers % PLAIN_PROGRESS_EVERY == 1)
            return
        text = (
            f"{run.resource}: page {run.pages}, {run.seen:,} records, "
            f"{run.seen / elapsed:,.0f} records/s"
        )
        if run.refreshed:
            text += f", {run.refreshed:,} refreshed by lookup"
        new_page = run.pages != self.last_pages
        self.last_pages = run.pages
        self._show(text, new_step=new_page and run.pages % PLAIN_PROGRESS_EVERY == 0)

    def _show(self, text: str, *, new_step: bool) -> None:
        if self.tty:
            self.width = max(self.width, len(text))
            self.stdout.write("\r" + text.ljust(self.width), ending="")
            self.stdout.flush()
        elif self.verbosity >= 2 or new_step:
            self.stdout.write(text)

    def end_line(self) -> None:
        """Leave the in-place line before anything else is written."""
        if self.tty and self.width:
            self.stdout.write("")
            self.width = 0


class Command(BaseCommand):
    help = (
        "Walk the service's /page endpoint of a resource into the local mirror: new and changed "
        "records are written page by page, unchanged ones are left alone. For orders, the "
        "change feed then reads /orders/search back to its watermark and looks up what "
        "changed outside the page window (CHANGE_FEED); when the search index is not current, "
        "the non-terminal orders the window hides are refreshed by lookup too, and a warning "
        "says why (exit status 0). For orders and refunds, the refunds still pending or "
        "processing are then refreshed by lookup. One run "
        "per resource at a time across all hosts (a lease in the database). Exit status: 0 "
        f"done; {EXIT_FAILED} failed (the error is also recorded on the sync run); "
        f"{EXIT_LEASE_HELD} another run holds the lease (nothing done); {EXIT_AUTH_FAILED} the "
        "service rejected the API key (401); 2 invalid options. Progress: one line rewritten "
        "in place on a terminal; elsewhere (cron, logs) a plain line every "
        f"{PLAIN_PROGRESS_EVERY}th page or backfill search answer, every page, lookup and "
        "answer with -v 2, none with -v 0."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--resource",
            default="orders",
            type=resource_name,
            help="Resource to walk, /<resource>/page (default: orders). Orders go into Order and "
            "Customer (the refunds they carry into Refund), refunds into Refund, payouts into "
            "Payout (with their items), balance_transactions into BalanceTransaction (both then "
            "look up the transactions, orders and refunds they name that the mirror lacks, at "
            "most --refresh-limit of each), balances: one /balances snapshot into "
            "BalanceSnapshot; the others are stored raw in RemoteRecord, keyed by resource and "
            "id. A walk of orders or refunds ends with the refresh of the refunds still pending "
            "or processing. "
            f"Known: {', '.join(sorted(COLLECTIONS))}; any other name (lower-case letters, "
            "digits, underscores) needs --collection.",
        )
        parser.add_argument(
            "--collection",
            default=None,
            help="The property of the resource's pages that holds the records (default: the "
            "known one for --resource, e.g. transactions for balance_transactions; required "
            "for any other resource).",
        )
        parser.add_argument(
            "--page-size",
            type=whole_number(1, MAX_PAGE_SIZE),
            default=None,
            help=f'Records per page, 1 to {MAX_PAGE_SIZE} (default: DJANGO_ORDERS["PAGE_SIZE"], '
            f"{DEFAULTS['PAGE_SIZE']:,} unless set).",
        )
        parser.add_argument(
            "--max-pages",
            type=whole_number(1),
            default=None,
            help="Walk at most this many pages (default: up to the provider's page window, "
            'DJANGO_ORDERS["MAX_PAGE_NUMBER"], 10 unless set). A number above the window walks '
            "past it where the service serves deeper pages; where it does not, the walk still "
            "ends cleanly at the first page the service refuses.",
        )
        parser.add_argument(
            "--refresh-limit",
            type=whole_number(0),
            default=None,
            help="At most this many non-terminal orders outside the walk, and as many refunds "
            "still pending or processing, refreshed by lookup per run; 0 for none (default: "
            'DJANGO_ORDERS["REFRESH_LIMIT"], '
            f"{DEFAULTS['REFRESH_LIMIT']:,} unless set).",
        )

        parser.add_argument(
            "--backfill",
            action="store_true",
            help="Instead of the page walk, read the whole history of the resource through "
            "/<resource>/search and look up every record the mirror lacks or holds at an older "
            "state. Saves a checkpoint after each search answer: killed, the next --backfill "
            "goes on from it. When it finishes it leaves the resource's watermark (for orders, "
            'the change feed\'s). Progress: "done / at least N". Resources with a search '
            f"index only: {', '.join(BACKFILLED)} (default: off).",
        )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # Kept so that handle() can refuse an option combination the way argparse refuses a
        # bad option: usage and exit status 2 from the command line, CommandError otherwise.
        self._parser = super().create_parser(prog_name, subcommand, **kwargs)
        return self._parser

    def handle(self, *args: Any, **options: Any) -> None:
        if options["collection"] is None and options["resource"] not in COLLECTIONS:
            self._parser.error(
                f"argument --resource: unknown resource {options['resource']!r}: give the "
                "property of its pages that holds the records with --collection (known "
                f"resources: {', '.join(sorted(COLLECTIONS))})"
            )
        if options["backfill"]:
            self._refuse_with_backfill(options)
        verbosity = options["verbosity"]
        display = ProgressDisplay(self.stdout, verbosity)
        started = time.monotonic()
        try:
            run = sync_orders(
                resource=options["resource"],
                collection=options["collection"],
                page_size=options["page_size"],
                max_pages=options["max_pages"],
                refresh_limit=options["refresh_limit"],
                progress=display,
                backfill=options["backfill"],
            )
        except SyncAlreadyRunning as exc:
            display.end_line()
            raise CommandError(str(exc), returncode=EXIT_LEASE_HELD) from None
        except AuthenticationFailed as exc:
            display.end_line()
            raise CommandError(
                f"The service rejected the API key: {exc}", returncode=EXIT_AUTH_FAILED
            ) from None
        except (OrdersError, ValueError) as exc:
            # ValueError: an invalid page size or an unknown resource, said plainly.
            display.end_line()
            raise CommandError(f"Sync failed: {exc}", returncode=EXIT_FAILED) from None
        display.end_line()
        if verbosity >= 1:
            self.stdout.write(self.style.SUCCESS(self.summary(run, time.monotonic() - started)))
        if run.warning:
            # Exit status 0: the run did what it could (window walk, open-order refresh).
            self.stderr.write(self.style.WARNING(f"Warning (sync run {run.pk}): {run.warning}."))
        if run.skipped:
            # On stderr, which cron mails: the walk went on, but these records are missing.
            self.stderr.write(
                self.style.WARNING(
                    f"{run.skipped} record(s) set aside, refused by the database or malformed "
                    f"(sync run {run.pk}):\n{run.problems}"
                )
            )

    def _refuse_with_backfill(self, options: dict[str, Any]) -> None:
        """Combinations with --backfill that cannot work are bad options (exit status 2, with
        the usage), not a failed run: a resource without a search index, and the walk's own
        bounds, which a backfill (no page walk, no refresh of open orders) would ignore."""
        if options["resource"] not in BACKFILLED:
            self._parser.error(
                f"argument --backfill: --resource {options['resource']} has no search index to "
                f"backfill from (--backfill works with --resource {_either(BACKFILLED)})"
            )
        for flag in ("max_pages", "refresh_limit"):
            if options[flag] is not None:
                option = "--" + flag.replace("_", "-")
                self._parser.error(
                    f"argument {option}: not allowed with --backfill, which walks no pages and "
                    f"refreshes nothing by lookup ({option} bounds a run without --backfill)"
                )

    @staticmethod
    def summary(run: SyncRun, seconds: float) -> str:
        """What the run did, in sentences: counts with thousands separators, plurals agreeing,
        and the walk's end said in words rather than its stored code."""
        if run.end_reason == "backfill":
            return backfill_summary(run, seconds)
        kind = RESOURCES.get(run.resource)
        is_orders = kind is not None and kind.refreshed  # open records refreshed by lookup
        noun = kind.noun if kind is not None else ("record", "records")
        lines = [
            f"Synced {run.resource}: {plural(run.pages, 'page', 'pages')}, "
            f"{plural(run.seen, *noun)} seen: {run.created:,} new, {run.updated:,} changed, "
            f"{run.unchanged:,} unchanged."
        ]
        if is_orders:
            lines.append(
                f"{plural(run.refreshed, 'open order', 'open orders')} outside the walk "
                f"refreshed by lookup, {run.refresh_waiting:,} waiting for a later run."
            )
        if kind is not None and kind.looks_up_named:
            lines.append(
                f"{plural(run.refreshed, 'record', 'records')} they name that the mirror lacked "
                "looked up by id."
            )
        if run.refunds_refreshed or run.refunds_waiting:
            # Only when there were refunds to refresh: most runs of most shops have none.
            lines.append(
                f"{plural(run.refunds_refreshed, 'refund', 'refunds')} still pending or "
                f"processing refreshed by lookup ({run.refunds_changed:,} changed), "
                f"{run.refunds_waiting:,} waiting for a later run."
            )
        end = END_REASONS.get(run.end_reason, END_REASONS[""])
        lines.append(end.format(pages=run.pages, pages_said=plural(run.pages, "page", "pages")))
        if run.end_reason == "page_window":
            lines.append(
                (WINDOW_ORDERS if is_orders else WINDOW_RECORDS).format(resource=run.resource)
            )
        if run.index_freshness:
            lines.append(feed_summary(run))
        if run.rate_limited:
            lines.append(rate_summary(run))
        lines.append(f"{seconds:,.1f} seconds.")
        return " ".join(lines)


def rate_summary(run: SyncRun) -> str:
    """ "Rate limited: 2 429 answers, the run's requests held 4.0 seconds in all."."""
    answers = plural(run.rate_limited, "429 answer", "429 answers")
    return f"Rate limited: {answers}, the run's requests held {run.rate_held:,.1f} seconds in all."


def backfill_done(run: SyncRun) -> str:
    """ "1,200 / at least 48,210 done, 35 looked up"."""
    total = "?" if run.service_total is None else f"{run.service_total:,}"
    bound = "" if run.service_total_exact or run.service_total is None else "at least "
    return f"{run.feed_read:,} / {bound}{total} done, {run.feed_lookups:,} looked up"


def backfill_summary(run: SyncRun, seconds: float) -> str:
    kind = RESOURCES.get(run.resource)
    nouns = kind.noun[1] if kind is not None else run.resource
    text = (
        f"Backfilled {nouns}: {backfill_done(run)} ({run.created:,} new, "
        f"{run.updated:,} changed, {run.unchanged:,} unchanged); search index "
        f"{run.index_freshness or 'unknown'}"
    )
    if run.watermark_after is not None and run.watermark_after != run.watermark_before:
        moment = f"{run.watermark_after:%Y-%m-%d %H:%M:%S} UTC"
        if kind is not None and kind.change_feed:
            text += f"; the change feed goes on from {moment}"
        else:
            text += f"; watermark {moment} ({nouns} have no change feed: a later --backfill "
            text += "looks up only what changed)"
    if run.standing:
        text += f"; {run.standing}"
    rate = f" {rate_summary(run)}" if run.rate_limited else ""
    return f"{text}.{rate} {seconds:,.1f} seconds."


def feed_summary(run: SyncRun) -> str:
    """The change feed's part of the summary: what it read and looked up, how fresh the index
    was, where the watermark stands, and the service's count beside the mirror's."""
    text = (
        f"Change feed: {plural(run.feed_read, 'change', 'changes')} read back to the "
        f"watermark, {run.feed_lookups:,} looked up; search index {run.index_freshness}"
    )
    before, after = run.watermark_before, run.watermark_after
    if before is None and after is not None:
        text += f"; first watermark {after:%Y-%m-%d %H:%M:%S} UTC"
    elif before is not None and after is not None and after > before:
        text += f"; watermark {before:%Y-%m-%d %H:%M:%S} -> {after:%Y-%m-%d %H:%M:%S} UTC"
    elif before is not None:
        text += f"; watermark kept at {before:%Y-%m-%d %H:%M:%S} UTC"
    if run.standing:
        text += f"; {run.standing}"
    if run.index_freshness == "current" and run.watermark_before is not None:
        text += "; it stood in for the refresh of open orders"
    return text + "."


def plural(count: int, singular: str, plural: str) -> str:
    return f"{count:,} {singular if count == 1 else plural}"


#: The walk's end (``SyncRun.end_reason``) as people read it.
END_REASONS = {
    "last_page": "The walk reached the last page.",
    "max_pages": "The walk stopped after {pages_said}, as --max-pages asked.",
    "page_window": "The walk ended at the provider's page window, after page {pages:,}.",
    "": "The walk ended.",
}
WINDOW_ORDERS = (
    "The service lists no older orders there. The mirror keeps every order it has seen, and "
    "orders outside the window stay correct through the change feed (or, when the search "
    "index cannot be trusted, the refresh of open orders); run the sync at least as often as "
    "a window of new orders arrives. Where the service serves deeper pages, --max-pages N "
    "walks past the window."
)
WINDOW_RECORDS = (
    "The service lists no older {resource} there and does not say how many there are. The "
    "mirror keeps every record it has seen; records that change after leaving the window are "
    "not refreshed. Where the service serves deeper pages, --max-pages N walks past the window."
)


def _either(names: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
