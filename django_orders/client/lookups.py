"""Lookups several at a time: the refresh of orders the page walk cannot reach, of the
refunds still moving (``lookup_refunds``), and the backfill's records of a raw resource
(``lookup_records``).

``REFRESH_CONCURRENCY`` lookups in flight, each worker thread with its own client, all sharing
one ``RateGate``; only HTTP happens on the workers, the calling thread writes each answer. Why:
docs/architecture/refresh.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from functools import partial
from itertools import islice
from typing import TypeVar

from ..conf import orders_settings
from ..conf.table import HEARTBEAT_SECONDS
from .lookup_calls import (
    ClientPerThread,
    LookupClient,
    lookup,
    order_lookup,
    record_lookup,
    refund_lookup,
)
from .lookup_results import Lookup, RecordLookup, RefundLookup
from .rate_gate import RateGate
from .transport import get_client, new_client

__all__ = [
    "Lookup",
    "RecordLookup",
    "RefundLookup",
    "lookup_orders",
    "lookup_records",
    "lookup_refunds",
]


T = TypeVar("T")


def lookup_refunds(
    refund_ids: Iterable[str],
    *,
    concurrency: int | None = None,
    heartbeat: Callable[[], None] | None = None,
    gate: RateGate | None = None,
) -> Iterator[RefundLookup]:
    """``lookup_orders`` for refunds (``/refunds/lookup``): the same pool, limits and rules."""
    return _lookup_each(refund_lookup, refund_ids, concurrency, heartbeat, gate)


def lookup_records(
    resource: str,
    record_ids: Iterable[str],
    *,
    concurrency: int | None = None,
    heartbeat: Callable[[], None] | None = None,
    gate: RateGate | None = None,
) -> Iterator[RecordLookup]:
    """``lookup_orders`` for the records of ``resource`` (``/customers/lookup``...)."""
    return _lookup_each(partial(record_lookup, resource), record_ids, concurrency, heartbeat, gate)


def lookup_orders(
    order_ids: Iterable[str],
    *,
    concurrency: int | None = None,
    heartbeat: Callable[[], None] | None = None,
    gate: RateGate | None = None,
) -> Iterator[Lookup]:
    """Look up each order, ``concurrency`` (default ``REFRESH_CONCURRENCY``) at a time.

    Yields lookups as they finish, in the calling thread. A lookup that fails with anything but
    a 404 raises from the generator; lookups not yet started are then cancelled, and the ones in
    flight are waited for (at most their request deadline) and dropped. Closing the generator
    early does the same. ``heartbeat`` runs in the calling thread whenever ``HEARTBEAT_SECONDS``
    pass with lookups in flight and none finished (the caller renews its lease when it writes a
    result, and here when there is none to write). ``gate``: a ``RateGate`` shared with the
    caller's own client (the change feed's searches), so a 429 to either holds both; by default
    the pool's own.
    """
    return _lookup_each(order_lookup, order_ids, concurrency, heartbeat, gate)


def _lookup_each(
    call: Callable[[LookupClient, str, datetime], T],
    record_ids: Iterable[str],
    concurrency: int | None,
    heartbeat: Callable[[], None] | None,
    gate: RateGate | None,
) -> Iterator[T]:
    ids = list(dict.fromkeys(record_ids))
    if not ids:
        return
    if len(ids) == 1 and gate is None:
        # One lookup (the payment watcher's, an admin refresh of one order): this thread's
        # client, with its connection and its rate gate, and no pool.
        yield call(get_client(), ids[0], datetime.now(UTC))
        return
    if concurrency is None:
        concurrency = orders_settings.REFRESH_CONCURRENCY
    clients = ClientPerThread(partial(new_client, gate=gate or RateGate()))
    executor = ThreadPoolExecutor(
        max_workers=min(concurrency, len(ids)), thread_name_prefix="django-orders-lookup"
    )
    # At most ``concurrency`` lookups are submitted at a time, a new one as each finishes: each
    # ``wait`` then watches a handful of futures, not every one of a 2,000-order refresh.
    queue = iter(ids)
    try:
        pending: set[Future[T]] = {
            executor.submit(lookup, clients, call, i) for i in islice(queue, concurrency)
        }
        while pending:
            done, pending = wait(pending, timeout=HEARTBEAT_SECONDS, return_when=FIRST_COMPLETED)
            if not done and heartbeat is not None:
                heartbeat()
            for future in done:
                found = future.result()
                pending.update(executor.submit(lookup, clients, call, i) for i in islice(queue, 1))
                yield found
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        clients.close()
