"""The page sync engine: walk a ``/page`` resource into the mirror, then refresh by lookup.

The rules it keeps (DESIGN.md, api-spec.md traversal rules, api-notes.md page window):

- No transaction waits on HTTP: a page is fetched and parsed first (pages ahead, by two helper
  threads: ``read_ahead``), then written in one short
  ``transaction.atomic()`` with the run's progress and the lease renewal: at most six
  statements whatever the page size (five, unless on SQLite a page holds both new orders and
  changed ones), two more for the first page that changes something after one that did not.
  A page that changes nothing after one that did not (a re-sync) is one statement outside any
  transaction, which compares each record's bytes as sent with the stored ones in the database
  and answers with two counts (``comparison.stored_as_sent``); a page whose bytes differ but whose
  records do not costs one read more, and the new bytes' hashes are recorded
  (``comparison.store_new_bytes``). The progress and the lease are then saved once a second
  (``_WalkMode``).
- A whole page is parsed before anything of it is written, so a bad record fails the run naming
  page, record and field, with the earlier pages committed and nothing of the bad page written.
  What only a new or changed order needs (its timestamps, checkout fields and text) is read
  for the whole page when first needed (``page_parsing.parse_fetched(deferred=True)``): on the
  helper thread while pages bring new or changed orders, by the writer otherwise, and never
  for a page of unchanged orders, the whole of a re-sync.
- Records are deduplicated by id across the walk: orders created during a walk shift later
  pages, so the same record may come twice (the first, newer copy wins) and none is missed.
  The set of ids seen is the only thing that grows with the total (about 100 bytes an id).
- The walk also ends at the provider's page window; then non-terminal orders the walk did not
  see are refreshed by lookup, oldest refresh first, a bounded number per run.
- A ``SyncLease`` keeps two hosts from walking the same resource at once.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from django.utils import timezone

from ..client.factory import new_client
from ..client.pages import COLLECTIONS
from ..client.paging import PageWalk, iter_pages
from ..conf import orders_settings
from ..db import app_atomic, app_database, app_on_commit, refuse_outer_transaction
from ..exceptions import InvalidRecord, error_name
from ..mirror.announce import announce
from ..mirror.comparison import compare_orders, read_stored, store_new_bytes, stored_as_sent
from ..mirror.deferred_pages import read_deferred, reparse_deferred
from ..mirror.parsing import ParsedOrder, parse_order, parse_record
from ..mirror.store import MirrorResult
from ..mirror.walk_settings import walk_write_settings
from ..models import TERMINAL_STATUSES, Order, SyncRun
from .lease import Lease
from .pagewrite import MALFORMED, set_aside, write_page
from .progress import (
    PROGRESS_FIELDS,
    ProgressCallback,
    add_counts,
    counts_kept_on_commit,
    progress_values,
)
from .read_ahead import fetched_ahead
from .refresh import refresh_outside_walk

logger = logging.getLogger("django_orders.sync")

#: What a resource name may be: it becomes part of the URL path (``/<resource>/page``), and it
#: is stored in columns of this length (``SyncRun``, ``SyncLease``, ``RemoteRecord``).
RESOURCE_NAME = re.compile(r"[a-z0-9_]{1,64}")


def check_resource(resource: Any, collection: Any = None) -> str:
    """The collection property of ``resource``'s pages; ``ValueError`` naming the fix if the
    resource name is not a plain name, or the resource is unknown and no collection is given."""
    if not isinstance(resource, str) or not RESOURCE_NAME.fullmatch(resource):
        shown = (
            resource[:80] + "..." if isinstance(resource, str) and len(resource) > 80 else resource
        )
        raise ValueError(
            "resource must be a name of at most 64 lower-case letters, digits and underscores, "
            f"not {shown!r}"
        )
    if collection is None:
        if resource not in COLLECTIONS:
            raise ValueError(
                f"unknown resource {resource!r}: give the collection property of its pages "
                f"(collection=... or --collection); known: {', '.join(sorted(COLLECTIONS))}"
            )
        return COLLECTIONS[resource]
    if not isinstance(collection, str) or not collection:
        raise ValueError(f"collection must be a non-empty string, not {collection!r}")
    return collection


def sync_orders(
    *,
    resource: str = "orders",
    collection: str | None = None,
    page_size: int | None = None,
    max_pages: int | None = None,
    refresh_limit: int | None = None,
    progress: ProgressCallback | None = None,
) -> SyncRun:
    """Walk ``/<resource>/page`` into the mirror and return the finished ``SyncRun``.

    The engine is generic: ``collection`` is the property of the page that holds the records
    (``transactions`` for ``balance_transactions``); by default the known one for ``resource``,
    and required for a resource it does not know. Orders go into ``Order`` and ``Customer``,
    any other resource raw into ``RemoteRecord``.

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
    collection = check_resource(resource, collection)
    page_size = orders_settings.PAGE_SIZE if page_size is None else page_size
    refresh_limit = orders_settings.REFRESH_LIMIT if refresh_limit is None else refresh_limit
    if isinstance(refresh_limit, bool) or not isinstance(refresh_limit, int) or refresh_limit < 0:
        raise ValueError(f"refresh_limit must be a whole number >= 0, not {refresh_limit!r}")
    # A client of the run's own, not this thread's: the read-ahead thread uses it, and may
    # still be finishing a request when the run ends (read_ahead.run_ahead).
    client = new_client()
    try:
        # Checks page_size and max_pages before anything is taken or recorded.
        walk = iter_pages(
            client,
            resource,
            collection,
            page_size,
            max_pages=max_pages,
            max_page_number=_page_window(max_pages),
        )
        # Orders pages read light, as structs (``Page.typed``; ``parse_fetched`` takes both).
        walk.typed = resource == "orders"
        lease = Lease(resource)
        lease.acquire()
        try:
            _close_abandoned_runs(resource)
            run = SyncRun.objects.create(resource=resource, page_size=page_size, host=lease.owner)
            try:
                _run(walk, run, lease, refresh_limit, progress)
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
    """Mark the resource's runs still ``running`` as failed; return how many.

    Called only while holding the lease: a live run renews the lease on every page, so holding
    it proves that no other run of this resource is still walking. A run still ``running`` is
    one whose process was killed (or that lost the lease and could not record it), and without
    this it would say ``running`` forever.
    """
    return SyncRun.objects.filter(resource=resource, outcome=SyncRun.Outcome.RUNNING).update(
        outcome=SyncRun.Outcome.FAILED, error=ABANDONED_RUN_ERROR, finished_at=timezone.now()
    )


def _run(walk, run: SyncRun, lease: Lease, refresh_limit: int, progress) -> None:
    seen_ids: set[str] = set()
    with walk_write_settings(Order):
        nonterminal_seen = _walk(walk, run, lease, seen_ids, progress)
        run.end_reason = walk.end_reason or ""
        SyncRun.objects.filter(pk=run.pk).update(end_reason=run.end_reason)
        if walk.resource == "orders":
            refresh_outside_walk(run, lease, seen_ids, nonterminal_seen, refresh_limit, progress)
    # Durable again (and this commit makes every earlier one durable: the WAL is sequential).
    run.outcome = SyncRun.Outcome.SUCCEEDED
    run.finished_at = timezone.now()
    run.save(
        update_fields=["outcome", "finished_at", "refresh_waiting", "problems", *PROGRESS_FIELDS]
    )


def _walk(walk: PageWalk, run: SyncRun, lease: Lease, seen_ids: set[str], progress) -> int:
    """Write every page, one transaction each; return how many non-terminal orders it saw."""
    is_orders = walk.resource == "orders"
    known_customers: set[str] = set()
    nonterminal_seen = 0
    mode = _WalkMode()
    for parsed in _pages_ahead(walk, mode):
        problems_before = run.problems
        _set_aside_malformed(run, parsed)
        fresh: dict[str, Any] = {}
        for record in parsed:
            if record.id not in seen_ids:
                fresh.setdefault(record.id, record)
        seen_ids.update(fresh)
        records = list(fresh.values())
        now = timezone.now()
        # When the page's request was sent: the mirror keeps an order it holds from a later
        # request (mirror.lifecycle). A page without it counts as sent now.
        sent_at = getattr(parsed, "sent_at", None) or now
        with counts_kept_on_commit(run):
            results = _quiet_page(records, known_customers, mode) if is_orders else None
            if results is None and is_orders:
                # The page is written: its deferred fields are read now, outside the page's
                # transaction, so a malformed record is set aside before anything is written.
                records = _read_or_set_aside(run, records, fresh)
            commit = partial(_commit_page, run, lease, len(records), problems_before, now, mode)
            if results is None:
                # One transaction; record by record only if the database refuses one.
                results = write_page(
                    walk.resource,
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
        if is_orders:
            nonterminal_seen += sum(r.status not in TERMINAL_STATUSES for r in records)
        if progress is not None:
            progress(run)
    return nonterminal_seen


def _set_aside_malformed(run: SyncRun, parsed: list) -> None:
    """Count and explain the malformed records of a page parsed record by record
    (``mirror.parsing.LenientPage``); the run is saved with the page."""
    for where, exc in getattr(parsed, "set_aside", ()):
        set_aside(run, where, exc, why=MALFORMED)


def _read_or_set_aside(run: SyncRun, records: list, fresh: dict[str, Any]) -> list:
    """``records`` with their deferred fields read (``read_deferred``); when that finds a
    malformed record, the page parsed again record by record, that record set aside."""
    try:
        read_deferred(records)
    except InvalidRecord:
        reparsed = reparse_deferred(records)
        _set_aside_malformed(run, reparsed)
        kept: dict[str, Any] = {}
        for record in reparsed:
            if record.id in fresh:  # as the page was deduplicated against the walk
                kept.setdefault(record.id, record)
        return list(kept.values())
    return records


#: Seconds between two saves of a run's progress (and renewals of its lease) while its pages
#: write nothing. Well inside the lease's margin over one page's longest read (``lease``).
QUIET_PERSIST_INTERVAL = 1.0


class _WalkMode:
    """What the last page said about the next one.

    ``writing``: whether the last page wrote orders. Then the next one likely will too (a first
    sync), so the helper thread reads its deferred fields before handing it over, keeping them
    off the writer's path as before deferring, and the writer reads the stored fingerprints in
    the page's transaction, as ``store_orders`` does. Otherwise (a re-sync) the deferred fields
    are left unread, and the writer compares the page first, outside any transaction: a page
    of unchanged orders is then one statement (``_quiet_page``), with the run's progress saved
    and the lease renewed every ``QUIET_PERSIST_INTERVAL`` seconds only. A wrong guess costs two
    reads more on a page that turned out to change, or moves the reading to the writer.
    """

    __slots__ = ("persisted_at", "writing")

    def __init__(self) -> None:
        self.writing = True
        self.persisted_at = time.monotonic()

    def persist_due(self) -> bool:
        return time.monotonic() - self.persisted_at >= QUIET_PERSIST_INTERVAL


def _quiet_page(
    records: list[ParsedOrder], known_customers: set[str], mode: _WalkMode
) -> list[MirrorResult] | None:
    """A page that changes nothing in the mirror, counted without writing; ``None`` when the
    page is to be written as usual (it changes something, or the last page wrote).

    Its records' bytes decide first (one statement, no row read); only if some differ from the
    stored ones, their fingerprints are read and compared: other bytes may hold the same record.
    """
    if mode.writing:
        return None
    comparison = compare_orders(records, known_customers=known_customers, read=False)
    if not stored_as_sent(comparison):
        # Bytes other than the stored ones, or not known: the fingerprints decide.
        read_stored(comparison)
        if not comparison.unchanged:
            return None  # written in its transaction, which reads the fingerprints again
        store_new_bytes(comparison)  # so that the next re-sync needs the one statement again
    known_customers.update(comparison.customers)
    return [MirrorResult(unchanged=len(comparison.orders))]


def _count_page(run: SyncRun, seen: int, results: list[MirrorResult]) -> None:
    run.pages += 1
    run.seen += seen
    for result in results:
        add_counts(run, result)


def _commit_page(run, lease, seen, problems_before, now, mode, results: list[MirrorResult]) -> None:
    """Inside a page's transaction: progress, lease and signals commit with its rows."""
    _count_page(run, seen, results)
    for result in results:
        app_on_commit(partial(announce, result))
    values = progress_values(run)
    if run.problems != problems_before:
        values["problems"] = run.problems
    SyncRun.objects.filter(pk=run.pk).update(**values)
    lease.renew(now=now)
    mode.persisted_at = time.monotonic()


def _pages_ahead(walk: PageWalk, mode: _WalkMode) -> Iterator[list]:
    """The walk's parsed pages, fetched and parsed ahead by two helper threads (``read_ahead``).

    A helper process did this before issue 22, so that parsing would not compete with the
    writer for the interpreter; with pages parsed by msgspec (``page_parsing``) it was no
    faster than a thread on SQLite or PostgreSQL (benchmarks/README.md), and was removed.
    """
    if walk.resource == "orders":
        return fetched_ahead(walk, parse_order, partial(_prepare_orders, mode), deferred=True)
    return fetched_ahead(walk, parse_record)


def _prepare_orders(mode: _WalkMode, orders: list[ParsedOrder]) -> None:
    """On the helper thread: while pages write (``_WalkMode``), read the page's deferred fields
    and encode its customers; otherwise only encode the customers that came without their
    bytes' fingerprint (a page not read light: ``Page.typed``)."""
    if mode.writing:
        read_deferred(orders)
    _encode_customers(orders, all_of_them=mode.writing)


def _encode_customers(orders: list[ParsedOrder], *, all_of_them: bool) -> None:
    """Encode and fingerprint each customer of a page once, on the helper thread.

    ``ParsedCustomer`` does it lazily, and the writer asks only for customers it has not written
    yet in this walk: done there, it is Python work on the critical path while the helper
    thread idles waiting for the writer. Copies repeated within the page are skipped; one the
    writer turns out not to need costs a few microseconds of the helper's idle time. In a
    re-sync the helper is the busy one, and a customer whose bytes are the stored ones
    (``wire_fingerprint``) is never encoded: only those without one are (``all_of_them=False``).
    """
    done: set[str] = set()
    for order in orders:
        customer = order.customer
        if customer.id not in done and (all_of_them or not customer.wire_fingerprint):
            done.add(customer.id)
            customer.fingerprint  # noqa: B018  (computes and caches raw_json too)


def _record_failure(run: SyncRun, exc: BaseException) -> None:
    """Mark the run failed with the error; never hides the original error if this fails too."""
    message = str(exc) or error_name(exc)
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        message = "interrupted"
    error = f"{error_name(exc)}: {message}"
    run.outcome = SyncRun.Outcome.FAILED
    run.error = error
    run.finished_at = timezone.now()
    try:
        # With the counts: pages that wrote nothing save them only now and then (_WalkMode).
        SyncRun.objects.filter(pk=run.pk).update(
            outcome=run.outcome,
            error=run.error,
            finished_at=run.finished_at,
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
