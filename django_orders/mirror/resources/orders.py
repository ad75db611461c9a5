"""The orders resource: pages read light, parsed by the order schema, stored with their
customers into ``Order`` and ``Customer`` (``store.store_orders``), refreshed by lookup while
open. Its walk shortcuts are in docs/architecture/sync.md."""

from __future__ import annotations

from collections.abc import Sequence

from ...client.pages import COLLECTIONS
from ...models import TERMINAL_STATUSES, Order
from ..comparison import compare_orders, read_stored, store_new_bytes, stored_as_sent
from ..deferred_pages import read_deferred, reparse_deferred
from ..parsing import ParsedOrder, parse_order
from ..store import MirrorResult, store_orders
from . import Resource


def quiet_page(records: list[ParsedOrder], known_customers: set[str]) -> MirrorResult | None:
    """The page counted without writing when it changes nothing in the mirror; ``None`` when
    it must be written. The bytes decide in one statement; fingerprints only if they differ."""
    comparison = compare_orders(records, known_customers=known_customers, read=False)
    if not stored_as_sent(comparison):
        read_stored(comparison)
        if not comparison.unchanged:
            return None  # written in its transaction, which reads the fingerprints again
        store_new_bytes(comparison)  # so that the next re-sync needs the one statement again
    known_customers.update(comparison.customers)
    return MirrorResult(unchanged=len(comparison.orders))


def prepare(orders: list[ParsedOrder], writing: bool) -> None:
    """On the parsing thread: while pages write, read the deferred fields and encode every
    customer; otherwise only the customers that came without their bytes' fingerprint."""
    if writing:
        read_deferred(orders)
    encode_customers(orders, all_of_them=writing)


def encode_customers(orders: list[ParsedOrder], *, all_of_them: bool) -> None:
    """Encode and fingerprint each customer of a page once, off the writer's path: the writer
    then finds the work done. Copies repeated within the page are skipped."""
    done: set[str] = set()
    for order in orders:
        customer = order.customer
        if customer.id not in done and (all_of_them or not customer.wire_fingerprint):
            done.add(customer.id)
            customer.fingerprint  # noqa: B018  (computes and caches raw_json too)


def customers(records: Sequence[ParsedOrder]) -> set[str]:
    return {record.customer.id for record in records}


def is_open(record: ParsedOrder) -> bool:
    return record.status not in TERMINAL_STATUSES


ORDERS = Resource(
    name="orders",
    collection=COLLECTIONS["orders"],
    model=Order,
    parse=parse_order,
    store=store_orders,
    typed=True,
    read_deferred=read_deferred,
    reparse=reparse_deferred,
    quiet=quiet_page,
    prepare=prepare,
    is_open=is_open,
    customers=customers,
    noun=("order", "orders"),
    search_type="order",
)
