"""Lookups fed one by one as the caller finds them, for a pool that must not drain between them.

``lookup_orders`` takes its ids all at once and empties before it returns; the backfill finds
its orders an answer at a time, and keeps ``REFRESH_CONCURRENCY`` lookups in flight across
answers: each worker thread takes the next id queued as soon as it is free, while the caller
writes what the others found. Same clients and rules as ``lookups`` (``lookup_calls``: one
client a worker, one ``RateGate``, a 404 answered as ``record=None``, only HTTP on the workers).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import Any, Generic, TypeVar

from ..conf import orders_settings
from .lookup_calls import ClientPerThread, LookupClient, lookup, order_lookup, record_lookup
from .rate_gate import RateGate
from .transport import new_client

__all__ = ["LookupStream", "lookup_stream"]

T = TypeVar("T")


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
