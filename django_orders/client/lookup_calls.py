"""What each lookup of a pool is: the call per resource (a 404 answered as ``record=None``), run
on a worker thread with that thread's client. Shared by ``lookups`` and ``lookup_stream``, which
say how the clients are built (``ClientPerThread``'s ``build``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from ..exceptions.wire import RequestRejected
from .lookup_results import Lookup, RecordLookup, RefundLookup

__all__ = [
    "ClientPerThread",
    "LookupClient",
    "lookup",
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
    try:
        return Lookup(order_id, client.lookup_order(order_id), sent_at)
    except RequestRejected as exc:
        if exc.status_code != 404:
            raise
        return Lookup(order_id, None, sent_at)


def refund_lookup(client: LookupClient, refund_id: str, sent_at: datetime) -> RefundLookup:
    try:
        return RefundLookup(refund_id, client.lookup_refund(refund_id), sent_at)
    except RequestRejected as exc:
        if exc.status_code != 404:
            raise
        return RefundLookup(refund_id, None, sent_at)


def record_lookup(
    resource: str, client: LookupClient, record_id: str, sent_at: datetime
) -> RecordLookup:
    try:
        return RecordLookup(record_id, client.lookup_record(resource, record_id), sent_at)
    except RequestRejected as exc:
        if exc.status_code != 404:
            raise
        return RecordLookup(record_id, None, sent_at)


def lookup(
    clients: ClientPerThread, call: Callable[[LookupClient, str, datetime], T], record_id: str
) -> T:
    """Run ``call`` on this worker thread's client, stamped with when it was sent."""
    return call(clients.get(), record_id, datetime.now(UTC))
