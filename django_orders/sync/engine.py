"""The page sync engine: walk a resource's ``/page`` into the mirror, then refresh by lookup.

Pages are fetched and parsed ahead on helper threads and written one short transaction each
(a first sync as a re-sync); no transaction waits on HTTP. Resources come from the registry
(``mirror.resources``). A page the database refuses is written again record by record: the
records it refuses are set aside (counted on the ``SyncRun`` with the reason) and the walk goes
on; errors of the database itself fail the run. The rules and their reasons:
docs/architecture/sync.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any

from django.db import connections, models, router
from django.utils import timezone

from ..client.pages import Page
from ..client.paging import PageWalk, iter_pages
from ..client.transport import new_client
from ..conf import orders_settings
from ..db import app_atomic, app_database, app_on_commit, refuse_outer_transaction
from ..exceptions.wire import error_name
from ..mirror.parsing import LenientPage, read_page
from ..mirror.refresh import announce
from ..mirror.resources import RESOURCE_NAME, Resource, backfilled_resources, resource_for
from ..mirror.result import MirrorResult
from ..models import SyncRun
from .backfill import run_backfill
from .feed import read_change_feed
from .lease import Lease, backfill_lease_name, live_owners, note_rate_counts, shared_gate
from .money import look_up_named, take_answer
from .progress import (
    MALFORMED,
    PROGRESS_FIELDS,
    REFUSALS,
    ProgressCallback,
    add_counts,
    counts_kept_on_commit,
    progress_values,
    reason_of,
    set_aside,
)
from .read_ahead import fetched_ahead
from .refresh import refresh_open_refunds, refresh_outside_walk, store_refund_for_run

__all__ = ["RESOURCE_NAME", "check_resource", "sync_orders"]


def write_page(
    kind: Resource,
    records: Sequence[Any],
    run: SyncRun,
    *,
    now: datetime,
    sent_at: datetime | None = None,
    known_customers: set[str],
    commit: Callable[[list[MirrorResult]], None],
) -> list[MirrorResult]:
    """Store a page's ``records`` and, in the same transaction, call ``commit`` with what was
    written (the caller saves the run's progress and renews the lease there). ``sent_at``:
    when the page's request was sent (``store_orders``'s)."""
    sent_at = sent_at or now
    resource, known = kind.name, known_customers
    new_customers = kind.customers(records) - known_customers
    saved = {k: v for k, v in vars(run).items() if k != "_state"}
    try:
        with app_atomic():
            results = [kind.store(records, now=now, sent_at=sent_at, known_customers=known)]
            commit(results)
        return results
    except REFUSALS as exc:
        # Rolled back: so are the customers' rows, and whatever commit() counted on the run.
        known_customers.difference_update(new_customers)
        vars(run).update(saved)
        logger.warning(
            "%s page %d: the database refused the page (%s); writing it record by record",
            resource,
            run.pages + 1,
            reason_of(exc),
        )
    with app_atomic():
        results = []
        for record in records:
            added = kind.customers([record]) - known_customers
            try:
                with app_atomic():
                    results.append(
                        kind.store([record], now=now, sent_at=sent_at, known_customers=known)
                    )
            except REFUSALS as exc:
                known_customers.difference_update(added)
                set_aside(run, f"{resource} page {run.pages + 1}, id {record.id}", exc)
        commit(results)
    return results


logger = logging.getLogger("django_orders.sync")


def check_resource(resource: Any, collection: Any = None) -> str:
    """The collection property of ``resource``'s pages; ``ValueError`` naming the fix if the
    resource name is not a plain name, or the resource is unknown and no collection is given."""
    return resource_for(resource, collection).collection


def sync_orders(
    *,
    resource: str = "orders",
    collection: str | None = None,
    page_size: int | None = None,
    max_pages: int | None = None,
    refresh_limit: int | None = None,
    progress: ProgressCallback | None = None,
    backfill: bool = False,
) -> SyncRun:
    """Walk ``/<resource>/page`` into the mirror and return the finished ``SyncRun``.

    ``backfill``: instead of the walk, read the resource's whole history through its search
    index, from the saved checkpoint if a backfill was stopped (``sync.backfill``).

    The engine is generic: ``collection`` is the property of the page that holds the records
    (``transactions`` for ``balance_transactions``); by default the known one for ``resource``,
    and required for a resource it does not know. Orders go into ``Order`` and ``Customer``
    (the refunds they carry into ``Refund``), refunds into ``Refund``, any other resource raw
    into ``RemoteRecord``. A walk of orders or refunds ends with the refresh of the refunds
    still pending or processing (``refresh.refresh_refunds``), at most ``refresh_limit`` of them.

    ``max_pages`` bounds the pages walked; above ``MAX_PAGE_NUMBER`` it also moves the page
    window, for a service that serves deeper pages (one that refuses them still ends the walk
    cleanly, as at the window).

    Raises ``SyncAlreadyRunning`` (and records nothing) when another run holds the lease. Any
    other error (``AuthenticationFailed``, a bad record, a server that keeps failing...) is
    recorded on the ``SyncRun`` (outcome failed, with the error) and then propagates.

    Raises ``TransactionManagementError`` inside ``transaction.atomic()`` (a view under
    ``ATOMIC_REQUESTS``, for one), before anything is sent: there the walk's HTTP calls would
    run inside the caller's transaction, and the lease would not be committed, so another host
    would wait on its row lock (PostgreSQL) instead of being told a sync is running.
    """
    refuse_outer_transaction(app_database())
    kind = resource_for(resource, collection)
    if backfill and not kind.backfilled:
        raise ValueError(
            f"--backfill reads the search index: {resource} has none here (backfill "
            f"{' or '.join(backfilled_resources())})"
        )
    page_size = orders_settings.PAGE_SIZE if page_size is None else page_size
    refresh_limit = orders_settings.REFRESH_LIMIT if refresh_limit is None else refresh_limit
    if isinstance(refresh_limit, bool) or not isinstance(refresh_limit, int) or refresh_limit < 0:
        raise ValueError(f"refresh_limit must be a whole number >= 0, not {refresh_limit!r}")
    # A client of the run's own, not this thread's: the read-ahead thread uses it, and may
    # still be finishing a request when the run ends (read_ahead.run_ahead).
    gate = shared_gate()  # the run's one gate: walk, feed and lookups (sync.lease)
    client = new_client(gate=gate)
    try:
        # Checks page_size and max_pages before anything is taken or recorded.
        walk = iter_pages(
            client,
            resource,
            kind.collection,
            page_size,
            max_pages=max_pages,
            max_page_number=_page_window(max_pages),
        )
        walk.raw = True  # each record as its bytes: the resource reads them (``read_page``)
        # A backfill takes hours at the lookups' pace: it holds a lease of its own, and the
        # scheduled sync walks, reads the feed and refreshes beside it (the forward-only rule
        # orders their writes to the same records).
        lease = Lease(backfill_lease_name(resource) if backfill else resource)
        lease.acquire()
        try:
            _close_abandoned_runs(resource)
            run = SyncRun.objects.create(resource=resource, page_size=page_size, host=lease.owner)
            setattr(run, "_rate_gate", gate)  # noqa: B010 - see lease.run_gate
            try:
                if backfill:
                    _backfill(kind, run, lease, progress)
                else:
                    _run(kind, walk, run, lease, refresh_limit, progress)
            except BaseException as exc:
                _record_failure(run, exc)
                raise
        finally:
            _release_quietly(lease)
    finally:
        client.close()
    return run


def _page_window(max_pages: Any) -> int | None:
    """The last page number a walk may ask for: ``MAX_PAGE_NUMBER``, or ``max_pages`` when
    that asks for more (the caller knows the service serves deeper pages)."""
    window = orders_settings.MAX_PAGE_NUMBER
    if window is not None and isinstance(max_pages, int) and max_pages > window:
        return max_pages
    return window


#: The error recorded on a run found still ``running`` by a later run that took the lease.
ABANDONED_RUN_ERROR = (
    "stopped without finishing (its process ended or lost the lease); a later run took over"
)


def _close_abandoned_runs(resource: str) -> int:
    """Mark the resource's runs still ``running`` as failed, but for those whose holder still
    holds a live lease; return how many.

    A live run renews its lease on every page: a run still ``running`` whose owner holds no
    live lease is one whose process was killed (or that lost the lease and could not record
    it), and without this it would say ``running`` forever. The sync and a backfill of one
    resource hold different leases, so each spares the other's live run.
    """
    return (
        SyncRun.objects.filter(resource=resource, outcome=SyncRun.Outcome.RUNNING)
        .exclude(host__in=live_owners())
        .update(
            outcome=SyncRun.Outcome.FAILED, error=ABANDONED_RUN_ERROR, finished_at=timezone.now()
        )
    )


def _run(kind: Resource, walk, run: SyncRun, lease: Lease, refresh_limit: int, progress) -> None:
    seen_ids: set[str] = set()
    walk_began = time.monotonic()
    with relaxed_commits(kind.model):
        if kind.paged:
            nonterminal_seen = _walk(kind, walk, run, lease, seen_ids, progress)
        else:
            nonterminal_seen = 0
            take_answer(kind, run, lease)
        run.end_reason = walk.end_reason or ""
        SyncRun.objects.filter(pk=run.pk).update(end_reason=run.end_reason)
        feed = None
        if kind.change_feed and orders_settings.CHANGE_FEED:
            feed = read_change_feed(run, lease, kind, seen_ids, walk_began, progress)
        # A current index read back to its watermark saw every change: no refresh needed.
        if kind.refreshed and (feed is None or not feed.replaces_refresh):
            refresh_outside_walk(
                run, lease, seen_ids, nonterminal_seen, refresh_limit, progress, kind=kind
            )
        if kind.refresh_refunds:
            refresh_open_refunds(run, lease, refresh_limit, progress)
        if kind.looks_up_named:
            look_up_named(run, lease, refresh_limit, progress, store_refund=store_refund_for_run)
    # Durable again (and this commit makes every earlier one durable: the WAL is sequential).
    run.outcome = SyncRun.Outcome.SUCCEEDED
    run.finished_at = timezone.now()
    run.save(
        update_fields=[
            "outcome",
            "finished_at",
            "refresh_waiting",
            "refunds_waiting",
            "problems",
            *PROGRESS_FIELDS,
            *note_rate_counts(run),
        ]
    )


@contextmanager
def relaxed_commits(model: type[models.Model]) -> Iterator[None]:
    """PostgreSQL: ``synchronous_commit`` off for the session while a sync writes, so a page's
    commit does not wait for its WAL to reach the disk; reset afterwards, before the run's
    outcome is saved. The mirror is a cache of the service: a crash of the database server can
    lose the last committed pages, never tear one apart (its rows, the run's progress and the
    lease commit or vanish together), and the next walk writes them again. Order creation is
    not affected. Other backends: nothing (no PRAGMA: the shop's database is the shop's).

    If the reset fails, the connection is closed so that nothing later inherits the setting.
    """
    connection = connections[router.db_for_write(model)]
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO OFF")
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("RESET synchronous_commit")
        except Exception:
            if not connection.in_atomic_block:
                connection.close()


def _backfill(kind: Resource, run: SyncRun, lease: Lease, progress) -> None:
    with relaxed_commits(kind.model):
        run_backfill(run, lease, kind, progress)
    run.outcome = SyncRun.Outcome.SUCCEEDED
    run.finished_at = timezone.now()
    fields = ["outcome", "finished_at", "problems", *PROGRESS_FIELDS, *note_rate_counts(run)]
    run.save(update_fields=fields)


def _walk(
    kind: Resource,
    walk: PageWalk,
    run: SyncRun,
    lease: Lease,
    seen_ids: set[str],
    progress: ProgressCallback | None = None,
) -> int:
    """Write every page, one short transaction each; return how many open records it saw."""
    known_customers: set[str] = set()
    nonterminal_seen = 0
    mode = _WalkMode(run.problems)
    malformed_ids: set[str] = set()
    for parsed in _pages_ahead(kind, walk, mode):
        unseen = [record for record in parsed if record.id not in seen_ids]
        records = _first_copies(unseen)
        now = timezone.now()
        # When the page's request was sent: the mirror keeps an order it holds from a later
        # request (mirror.store). A page without it counts as sent now.
        sent_at = getattr(parsed, "sent_at", None) or now
        _set_aside_malformed(run, parsed)
        with counts_kept_on_commit(run):
            results = _quiet_page(kind, records, known_customers, mode)
            if results is None:
                # The page is written: its records are read in full now, outside the page's
                # transaction, so a malformed record is set aside before anything is written,
                # and before duplicates are dropped: a valid later copy of an order replaces a
                # malformed first one.
                kept = _complete(kind, run, unseen)
                malformed_ids.update({r.id for r in unseen} - {r.id for r in kept})
                records = _first_copies(kept)
            seen_ids.update(record.id for record in records)
            commit = partial(_commit_page, run, lease, len(records), now, mode)
            if results is None:
                # One transaction; record by record only if the database refuses one.
                results = write_page(
                    kind,
                    records,
                    run,
                    now=now,
                    sent_at=sent_at,
                    known_customers=known_customers,
                    commit=commit,
                )
            elif mode.persist_due():
                with app_atomic():
                    commit(results)
            else:
                _count_page(run, len(records), results)
        mode.writing = any(result.created or result.updated for result in results)
        if kind.refreshed:
            nonterminal_seen += sum(map(kind.is_open, records))
        if progress is not None:
            progress(run)
    # Ids set aside as malformed count as seen once the walk is over: the refresh would look
    # them up only to set them aside again. (Not before: a later valid copy replaces them.)
    seen_ids.update(malformed_ids)
    return nonterminal_seen


def _first_copies(records: list) -> list:
    """``records`` without the later copies of an id (a page may repeat an order)."""
    first: dict[str, Any] = {}
    for record in records:
        first.setdefault(record.id, record)
    return list(first.values())


def _set_aside_malformed(run: SyncRun, parsed: list) -> None:
    """Count and explain the malformed records of a page parsed record by record
    (``mirror.parsing.LenientPage``); the run is saved with the page."""
    for where, exc in getattr(parsed, "set_aside", ()):
        set_aside(run, where, exc, why=MALFORMED)


def _complete(kind: Resource, run: SyncRun, records: list) -> list:
    """``records`` read in full (``kind.complete``), the malformed ones set aside."""
    kept, malformed = kind.complete(records)
    for where, exc in malformed:
        set_aside(run, where, exc, why=MALFORMED)
    return kept


#: Seconds between two saves of a run's progress (and renewals of its lease) while its pages
#: write nothing. Well inside the lease's margin over one page's longest read (``lease``).
QUIET_PERSIST_INTERVAL = 1.0


class _WalkMode:
    """What the last page said about the next one: ``writing`` if it wrote (a first sync: the
    reading thread parses the next page too), else a re-sync (pages compared first,
    outside any transaction). See docs/architecture/sync.md, "Quiet pages"."""

    __slots__ = ("persisted_at", "problems_persisted", "writing")

    def __init__(self, problems: str) -> None:
        self.writing = True
        self.persisted_at = time.monotonic()
        #: The run's ``problems`` as last written (a page may add some and persist nothing).
        self.problems_persisted = problems

    def persist_due(self) -> bool:
        return time.monotonic() - self.persisted_at >= QUIET_PERSIST_INTERVAL


def _quiet_page(
    kind: Resource, records: list, known_customers: set[str], mode: _WalkMode
) -> list[MirrorResult] | None:
    """A page that changes nothing in the mirror, counted without writing; ``None`` when the
    page is to be written as usual (it changes something, the last page wrote, or the resource
    has no such shortcut)."""
    if mode.writing:
        return None
    result = kind.quiet(records, known_customers)
    return None if result is None else [result]


def _count_page(run: SyncRun, seen: int, results: list[MirrorResult]) -> None:
    run.pages += 1
    run.seen += seen
    for result in results:
        add_counts(run, result)


def _commit_page(run, lease, seen, now, mode, results: list[MirrorResult]) -> None:
    """Inside a page's transaction: its signals commit with its rows, and so do the run's
    progress and the lease's renewal."""
    _count_page(run, seen, results)
    for result in results:
        app_on_commit(partial(announce, result))
    _persist(run, lease, now, mode)


def _persist(run, lease, now, mode: _WalkMode) -> None:
    """Inside a transaction of the walk: the run's progress (its ``problems`` if they changed
    since last written) and the lease's renewal, committed with it."""
    values = progress_values(run)
    if run.problems != mode.problems_persisted:
        values["problems"] = problems = run.problems
        app_on_commit(partial(setattr, mode, "problems_persisted", problems))
    SyncRun.objects.filter(pk=run.pk).update(**values)
    lease.renew(now=now)
    mode.persisted_at = time.monotonic()


def _pages_ahead(kind: Resource, walk: PageWalk, mode: _WalkMode) -> Iterator[list]:
    """The walk's pages read by the resource (``Resource.read_page``), fetched and read ahead by two
    helper threads (``read_ahead``). While pages write (a first sync), the reading thread also
    reads their records in full (``complete``), which the writer would otherwise do."""

    def read(page: Page) -> LenientPage:
        return read_page(kind, page.records, page.number)

    def prepare(parsed: LenientPage) -> None:
        if mode.writing:
            parsed[:], malformed = kind.complete(parsed, encode=True)
            parsed.set_aside.extend(malformed)

    return fetched_ahead(walk, read, prepare)


def _record_failure(run: SyncRun, exc: BaseException) -> None:
    """Mark the run failed with the error; never hides the original error if this fails too."""
    message = str(exc) or error_name(exc)
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        message = "interrupted"
    error = f"{error_name(exc)}: {message}"
    run.outcome = SyncRun.Outcome.FAILED
    run.error = error
    run.finished_at = timezone.now()
    note_rate_counts(run)
    try:
        # With the counts: pages that wrote nothing save them only now and then (_WalkMode).
        SyncRun.objects.filter(pk=run.pk).update(
            outcome=run.outcome,
            error=run.error,
            finished_at=run.finished_at,
            problems=run.problems,
            rate_limited=run.rate_limited,
            rate_held=run.rate_held,
            **progress_values(run),
        )
    except Exception:
        logger.exception("Could not record the failure of sync run %s", run.pk)


def _release_quietly(lease: Lease) -> None:
    try:
        lease.release()
    except Exception:
        # It expires on its own after SYNC_LEASE; the error that matters is the original one.
        logger.exception("Could not release %r", lease)
