"""The customers resource: raw records (``RemoteRecord``) walked through ``/customers/page``,
and, past the page window, read through ``/customers/search`` by ``sync_orders --backfill
--resource customers``, which looks up (``/customers/lookup``) each one the mirror lacks or
settled at an older ``updated_at``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...client.lookups import lookup_records
from ...client.pages import COLLECTIONS
from ...client.search import SearchResult
from .raw import RawResource, searched_raw


def same_customer(result: SearchResult, held: tuple[Any, ...]) -> bool:
    """Whether the mirror holds the customer under the name the projection shows (the one
    field of a customer's projection about the customer)."""
    (raw,) = held
    return isinstance(raw, dict) and raw.get("name") == result.customer_name


class CustomersResource(RawResource):
    """Customers' records, raw, with their search index and lookups (the backfill)."""

    name = "customers"
    collection = COLLECTIONS["customers"]
    noun = ("customer", "customers")
    search_type = "customer"
    searched = searched_raw("customers", same_customer, "raw")
    has_lookups = True

    def look_up(
        self,
        ids: Iterable[str],
        *,
        concurrency: int | None = None,
        heartbeat: Callable[[], None] | None = None,
        gate: Any = None,
    ) -> Iterator[Any]:
        return lookup_records(
            self.name, ids, concurrency=concurrency, heartbeat=heartbeat, gate=gate
        )


CUSTOMERS = CustomersResource()
