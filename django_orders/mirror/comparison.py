"""What the mirror holds for a call's orders and customers, and whether they change it.

``compare_orders`` reads the stored fingerprints in one statement; ``is_stored`` compares a
record's bytes first (``wire_fingerprint``), its canonical text only when those differ. (A
walk's page is first counted by its bytes alone, before it is parsed: ``resources.orders.
quiet_page``.) See docs/architecture/sync.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.db import connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..db import app_database
from ..models.mirror import Customer, Order
from .parsed import ParsedCustomer, ParsedOrder
from .upsert import read_by_ids


class StoredOrder(NamedTuple):
    fingerprint: str
    wire_fingerprint: str
    status: str
    #: When the request whose answer the row holds was sent (``lifecycle``).
    observed_at: datetime | None = None


#: What ``read_stored`` reads of an order: ``StoredOrder``'s fields, after its id.
ORDER_READ = ("id", "fingerprint", "wire_fingerprint", "status", "observed_at")


class StoredCustomer(NamedTuple):
    fingerprint: str
    wire_fingerprint: str


def is_stored(
    record: ParsedOrder | ParsedCustomer, stored: StoredOrder | StoredCustomer | None
) -> bool:
    """Whether ``record`` is what the mirror holds: the same bytes as the ones stored came in
    as, or else the same canonical text (the fingerprint, encoded only if the bytes differ).

    The bytes decide first because comparing them needs nothing decoded or encoded: a re-sync
    of unchanged orders reads neither (``Order.wire_fingerprint``). Equal bytes always have
    equal canonical text, so this is exactly the fingerprint's verdict, only faster.
    """
    if stored is None:
        return False
    wire = stored.wire_fingerprint
    return (wire != "" and record.wire_fingerprint == wire) or (
        record.fingerprint == stored.fingerprint
    )


@dataclass
class Comparison:
    """A call's orders and customers (each once, the first copy) and what the mirror holds for
    them, by id (``stored``, ``stored_customers``). Read by ``compare_orders``, written by
    ``store_orders``.
    """

    orders: dict[str, ParsedOrder]
    customers: dict[str, ParsedCustomer]
    stored: dict[str, StoredOrder] = field(default_factory=dict)
    stored_customers: dict[str, StoredCustomer] = field(default_factory=dict)


def compare_orders(
    parsed_orders: Sequence[ParsedOrder],
    *,
    known_customers: set[str] | None = None,
    read: bool = True,
) -> Comparison:
    """The orders and customers ``store_orders`` would write, and (``read``) what the mirror
    holds for them: one statement, or none when there is nothing to read.

    A page walk reads this before its page's transaction, and skips the transaction altogether
    when nothing changed (``sync.engine``): a re-sync's pages are then one statement each.
    """
    orders: dict[str, ParsedOrder] = {}
    for order in parsed_orders:
        orders.setdefault(order.id, order)  # newest first: the first copy is the newest
    customers: dict[str, ParsedCustomer] = {}
    for order in orders.values():
        if known_customers is None or order.customer.id not in known_customers:
            customers.setdefault(order.customer.id, order.customer)
    comparison = Comparison(orders, customers)
    if read:
        read_stored(comparison)
    return comparison


def read_stored(comparison: Comparison) -> None:
    """Read what the mirror holds for ``comparison``'s orders and customers: one statement,
    none for no orders.

    Inside a transaction (a write's) the orders read are locked on PostgreSQL until it ends:
    the write decides from them whether an answer replaces the stored order (``lifecycle``)
    and which status change it announces, and no other writer may change them meanwhile.
    """
    orders, customers = comparison.orders, comparison.customers
    if orders:
        connection = connections[app_database()]
        customer_rows, order_rows = read_by_ids(
            (Customer, list(customers), ("id", "fingerprint", "wire_fingerprint")),
            (Order, list(orders), ORDER_READ),
            lock=(Order,) if connection.in_atomic_block else (),
        )
        comparison.stored_customers = {
            pk: StoredCustomer(print_, wire) for pk, print_, wire in customer_rows
        }
        comparison.stored = {
            pk: StoredOrder(print_, wire, status, _aware(connection, observed_at))
            for pk, print_, wire, status, observed_at in order_rows
        }


def _aware(connection, value: Any) -> datetime | None:
    """A datetime read by a raw cursor as the model field reads it: SQLite gives text in the
    connection's time zone, PostgreSQL an aware datetime."""
    if value is None or isinstance(value, datetime):
        return value
    parsed = parse_datetime(value)
    if parsed is None:
        raise ValueError(f"not a stored datetime: {value!r}")
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, connection.timezone or UTC)
    return parsed


def new_bytes(
    records: dict[str, ParsedOrder] | dict[str, ParsedCustomer],
    stored: dict[str, StoredOrder] | dict[str, StoredCustomer],
) -> list[tuple[str, str, str]]:
    """The ``(id, fingerprint, wire fingerprint)`` of each of ``records`` that ``read_stored``
    found unchanged though it came in other bytes (its fingerprint is the stored one): what
    ``store.store_new_bytes`` records, so that the next re-sync compares it by its bytes."""
    rows = []
    for pk, record in records.items():
        wire, previous = record.wire_fingerprint, stored.get(pk)
        # Unchanged here means the fingerprints agree wherever the bytes differ.
        if (
            wire
            and previous is not None
            and previous.wire_fingerprint != wire
            and record.fingerprint == previous.fingerprint
        ):
            rows.append((pk, record.fingerprint, wire))
    return rows
