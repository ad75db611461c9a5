"""Lookups: records fetched one by one by id, several in flight at once.

- What a lookup gives back (``Lookup``, ``RecordLookup``, ``RefundLookup``, in ``reading``):
  plain records with the time their request was sent, which the mirror stores without knowing
  how they were fetched.
- The call per resource (a 404 answered as ``record=None``), run on a worker thread with that
  thread's client (``ClientPerThread``).
- ``lookup_orders``, ``lookup_refunds``, ``lookup_records``: the refresh of the orders the page
  walk cannot reach, of the refunds still moving, and the backfill's records of a raw resource;
  they take their ids all at once and empty before they return.
- ``lookup_stream``: ids fed one by one as the caller finds them (the backfill finds its orders
  an answer at a time), so the pool does not drain between answers.

``REFRESH_CONCURRENCY`` lookups in flight, each worker thread with its own client, all sharing
one ``RateGate``; only HTTP happens on the workers, the calling thread writes each answer. Why:
docs/architecture/refresh.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from functools import partial
from itertools import islice
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from ..conf import orders_settings
from ..conf.table import HEARTBEAT_SECONDS
from ..exceptions.wire import RequestRejected
from .rate_gate import RateGate
from .reading import Lookup, RecordLookup, RefundLookup
from .transport import get_client, new_client

__all__ = [
    "ClientPerThread",
    "Lookup",
    "LookupClient",
    "LookupStream",
    "RecordLookup",
    "RefundLookup",
    "lookup",
    "lookup_orders",
    "lookup_records",
    "lookup_refunds",
    "lookup_stream",
    "order_lookup",
    "record_lookup",
    "refund_lookup",
]


T = TypeVar("T")


class LookupClient(Protocol):
    """What a pool asks of its clients (``OrdersClient`` is one)."""

    def lookup_order(self, order_id: str) -> dict[str, Any]: ...

    def lookup_refund(self, refund_id: str) -> dict[str, Any]: ...

    def lookup_record(self, resource: str, record_id: str) -> dict[str, Any]: ...

    def close(self) -> None: ...


class ClientPerThread:
    """A client for each worker thread, made by ``build`` on first use, all closed at the end.

    Not the calling thread's kept client (``get_client``): that would leave a client open in
    each worker thread when the pool ends, and these clients share the pool's ``RateGate``.
    """

    def __init__(self, build: Callable[[], LookupClient]) -> None:
        self._build = build
        self._local = threading.local()
        self._lock = threading.Lock()
        self._clients: list[LookupClient] = []

    def get(self) -> LookupClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._build()
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()


def order_lookup(client: LookupClient, order_id: str, sent_at: datetime) -> Lookup:
    return Lookup(order_id, _unless_unknown(client.lookup_order, order_id), sent_at)


def refund_lookup(client: LookupClient, refund_id: str, sent_at: datetime) -> RefundLookup:
    return RefundLookup(refund_id, _unless_unknown(client.lookup_refund, refund_id), sent_at)


def record_lookup(
    resource: str, client: LookupClient, record_id: str, sent_at: datetime
) -> RecordLookup:
    record = _unless_unknown(partial(client.lookup_record, resource), record_id)
    return RecordLookup(record_id, record, sent_at)


def _unless_unknown(
    fetch: Callable[[str], dict[str, Any]], record_id: str
) -> dict[str, Any] | None:
    """The record ``fetch`` gets, or ``None`` when the service answers 404: it does not know the
    id (any other refusal is raised)."""
    try:
        return fetch(record_id)
    except RequestRejected as exc:
        if exc.status_code != 404:
            raise
        return None


def lookup(
    clients: ClientPerThread, call: Callable[[LookupClient, str, datetime], T], record_id: str
) -> T:
    """Run ``call`` on this worker thread's client, stamped with when it was sent."""
    return call(clients.get(), record_id, datetime.now(UTC))


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


class LookupStream(Generic[T]):
    """``concurrency`` (default ``REFRESH_CONCURRENCY``) worker threads that look up the ids
    ``submit`` queues, oldest first. ``close`` (or leaving the ``with`` block) drops the ids not
    yet started and waits for the lookups in flight (at most their request deadline)."""

    def __init__(
        self,
        call: Callable[[LookupClient, str, datetime], T],
        *,
        concurrency: int | None = None,
        gate: RateGate | None = None,
    ) -> None:
        self._call = call
        self.concurrency = concurrency or orders_settings.REFRESH_CONCURRENCY
        self._clients = ClientPerThread(partial(new_client, gate=gate or RateGate()))
        self._executor = ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="django-orders-lookup"
        )

    def submit(self, record_id: str) -> Future[T]:
        """Queue one lookup; its future holds the lookup, or the error that is not a 404."""
        return self._executor.submit(lookup, self._clients, self._call, record_id)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._clients.close()

    def __enter__(self) -> LookupStream[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def lookup_stream(resource: str, *, gate: RateGate | None = None) -> LookupStream[Any]:
    """A stream of ``resource``'s lookups: ``Lookup`` of ``/orders/lookup``, ``RecordLookup``
    of the other resources' (``/customers/lookup``...)."""
    if resource == "orders":
        return LookupStream(order_lookup, gate=gate)
    return LookupStream(partial(record_lookup, resource), gate=gate)
