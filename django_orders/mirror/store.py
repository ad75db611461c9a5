"""Writing parsed upstream records into the mirror with a fixed number of statements.

Used by the page sync (one call per page) and by lookups (refresh); ``customer_row`` and
``order_row`` also by ``create_order``. Whatever the number of records, ``store_orders`` runs a
fixed number of statements: one read of the stored fingerprints of the customers and the orders,
then one write of the new or changed customers and one of the new or changed orders
(``upsert.write_read_rows``: on PostgreSQL rows that are all new go in by ``COPY``; on SQLite new
orders by a plain ``INSERT`` and changed ones by the upsert, two statements when a call has both),
and for a lookup one stamp of ``refreshed_at`` on the unchanged ones. Rows whose fingerprint did
not change are not written at all, so a re-sync of unchanged data writes nothing and ``changed_at``
means what it says. A record that came in as the same bytes as the stored row
(``wire_fingerprint``) is unchanged without its fingerprint being computed (``is_stored``); every
write sets the row's wire fingerprint with its fingerprint, empty when unknown, so the two never
describe different records. An unchanged record that came in other bytes gets its new bytes' hash
recorded, that column alone (``store_new_bytes``).

The caller owns the transaction (one short transaction per page or per lookup), on the
database the mirror is written to: the read and the writes belong together. A page walk may
also read first with ``compare_orders`` alone, outside a transaction, to learn that a page
changes nothing and skip its transaction (``sync.engine``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import NamedTuple, TypeVar

from django.utils import timezone

from ..db import app_database
from ..models import Customer, Order, RemoteRecord
from .parsing import ParsedCustomer, ParsedOrder, ParsedRecord
from .upsert import read_by_ids, upsert, write_read_rows
from .wire_match import count_matches, store_wire_fingerprints

#: The order's checkout columns, last in ``ORDER_COLUMNS``: derived from the
#: raw record like the others, so the fingerprint covers them too.
CHECKOUT_COLUMNS = (
    "total",
    "currency",
    "number",
    "payment_url",
    "paid_at",
    "canceled_at",
    "expires_at",
)
ORDER_COLUMNS = (
    "id",
    "status",
    "initiated_at",
    "completed_at",
    "customer",
    "raw",
    "fingerprint",
    "wire_fingerprint",
    "first_seen_at",
    "changed_at",
    "refreshed_at",
    *CHECKOUT_COLUMNS,
)
ORDER_UPDATE = (
    "status",
    "initiated_at",
    "completed_at",
    "customer",
    "raw",
    "fingerprint",
    "wire_fingerprint",
    "changed_at",
    *CHECKOUT_COLUMNS,
)
#: The contact columns come last, as in ``ORDER_COLUMNS``.
CUSTOMER_COLUMNS = (
    "id",
    "guest",
    "name",
    "raw",
    "fingerprint",
    "wire_fingerprint",
    "first_seen_at",
    "changed_at",
    "email_address",
    "phone_number",
)
CUSTOMER_UPDATE = (
    "guest",
    "name",
    "raw",
    "fingerprint",
    "wire_fingerprint",
    "changed_at",
    "email_address",
    "phone_number",
)
RECORD_COLUMNS = ("resource", "remote_id", "raw", "fingerprint", "first_seen_at", "changed_at")
RECORD_UPDATE = ("raw", "fingerprint", "changed_at")
#: Remote ids are unique per resource only (see ``RemoteRecord``).
RECORD_CONFLICT = ("resource", "remote_id")
_Row = TypeVar("_Row", Customer, Order)


@dataclass
class MirrorResult:
    """What a write did.

    ``orders`` holds the orders this call wrote, as model instances; ``first_seen`` and
    ``status_changes`` (instance, previous status) feed the signals. The instances are built on
    first access: a page walk with no signal receivers never needs them.
    """

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    now: datetime | None = None
    refreshed: bool = False
    _written: list[tuple[ParsedOrder, str | None]] = field(default_factory=list, repr=False)

    @cached_property
    def orders(self) -> dict[str, Order]:
        assert self.now is not None  # store_orders() sets it whenever it writes an order
        return {
            order.id: order_row(order, self.now, refreshed=self.refreshed)
            for order, _previous in self._written
        }

    @property
    def first_seen(self) -> list[Order]:
        return [self.orders[order.id] for order, previous in self._written if previous is None]

    @property
    def status_changes(self) -> list[tuple[Order, str]]:
        return [
            (self.orders[order.id], previous)
            for order, previous in self._written
            if previous is not None and previous != order.status
        ]


class StoredOrder(NamedTuple):
    fingerprint: str
    wire_fingerprint: str
    status: str


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

    @property
    def unchanged(self) -> bool:
        """Whether ``store_orders`` would write nothing (a lookup's stamp aside)."""
        stored, stored_customers = self.stored, self.stored_customers
        return all(
            is_stored(order, stored.get(order_id)) for order_id, order in self.orders.items()
        ) and all(
            is_stored(customer, stored_customers.get(customer_id))
            for customer_id, customer in self.customers.items()
        )


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
    none for no orders."""
    orders, customers = comparison.orders, comparison.customers
    if orders:
        customer_rows, order_rows = read_by_ids(
            (Customer, list(customers), ("id", "fingerprint", "wire_fingerprint")),
            (Order, list(orders), ("id", "fingerprint", "wire_fingerprint", "status")),
        )
        comparison.stored_customers = {
            pk: StoredCustomer(print_, wire) for pk, print_, wire in customer_rows
        }
        comparison.stored = {
            pk: StoredOrder(print_, wire, status) for pk, print_, wire, status in order_rows
        }


def stored_as_sent(comparison: Comparison) -> bool:
    """Whether the mirror holds every order and customer of ``comparison`` as the bytes it came
    in as: one statement that answers with two counts (``wire_match``), no row read.

    ``False`` when any of them came without its bytes' fingerprint (a page not read light:
    ``Page.typed``) or is stored from other bytes: the stored fingerprints decide then
    (``read_stored``). A page walk asks this first on a page that likely changes nothing.
    """
    orders = [(pk, order.wire_fingerprint) for pk, order in comparison.orders.items()]
    customers = [(pk, customer.wire_fingerprint) for pk, customer in comparison.customers.items()]
    if not all(wire for _pk, wire in orders) or not all(wire for _pk, wire in customers):
        return False
    order_count, customer_count = count_matches((Order, orders), (Customer, customers))
    return order_count == len(orders) and customer_count == len(customers)


def store_new_bytes(comparison: Comparison) -> None:
    """Record the wire fingerprint of each order and customer of ``comparison`` that
    ``read_stored`` found unchanged though it came in other bytes (its fingerprint is the
    stored one): at most one statement a table, and nothing else of the row is written
    (``wire_match.store_wire_fingerprints``). Without it, such a record would be read and
    compared on every re-sync, after the service changed how it writes its JSON."""

    def new_bytes(records, stored) -> list[tuple[str, str, str]]:
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

    store_wire_fingerprints(Order, new_bytes(comparison.orders, comparison.stored))
    store_wire_fingerprints(Customer, new_bytes(comparison.customers, comparison.stored_customers))


def store_orders(
    parsed_orders: Sequence[ParsedOrder],
    *,
    now: datetime | None = None,
    refreshed: bool = False,
    compare: bool = True,
    known_customers: set[str] | None = None,
) -> MirrorResult:
    """Upsert orders and their customers; records repeated in ``parsed_orders`` count once.

    ``refreshed=True`` (a lookup by id) also stamps ``refreshed_at``, even on unchanged orders,
    because the refresh queue is ordered by it. ``compare=False`` skips reading the stored
    fingerprints and writes every record through the upsert (one statement fewer): for an order
    that was just created upstream, which is new but for a rare replay; every record then counts
    as created.

    ``known_customers`` (used by a page walk) holds the ids of customers already written from a
    newer order earlier in the same walk: their copies in older orders are not written again.
    Orders embed a customer summary whose optional fields vary from order to order, so letting
    every copy overwrite the row would rewrite it on every run; the newest copy wins instead.
    The ids of this call's customers are added to the set.
    """
    now = now or timezone.now()
    result = MirrorResult(now=now, refreshed=refreshed)
    comparison = compare_orders(parsed_orders, known_customers=known_customers, read=compare)
    orders, customers = comparison.orders, comparison.customers
    if not orders:
        return result
    stored, stored_customers = comparison.stored, comparison.stored_customers
    if customers:
        _store_customers(customers, stored_customers, now, compared=compare)
        if known_customers is not None:
            known_customers.update(customers)
    new_rows: list[tuple] = []
    changed_rows: list[tuple] = []
    unchanged_ids: list[str] = []
    for order in orders.values():
        previous = stored.get(order.id)
        if is_stored(order, previous):
            result.unchanged += 1
            unchanged_ids.append(order.id)
            continue
        # Without the read (compare=False) nothing is known to be absent: all go to the upsert.
        (new_rows if compare and previous is None else changed_rows).append(
            (
                order.id,
                order.status,
                order.initiated_at,
                order.completed_at,
                order.customer.id,
                order.raw_json,
                order.fingerprint,
                order.wire_fingerprint,
                now,
                now,
                now if refreshed else None,
                order.total,
                order.currency,
                order.number,
                order.payment_url,
                order.paid_at,
                order.canceled_at,
                order.expires_at,
            )
        )
        result._written.append((order, None if previous is None else previous.status))
        if previous is None:
            result.created += 1
        else:
            result.updated += 1
    update = (*ORDER_UPDATE, "refreshed_at") if refreshed else ORDER_UPDATE
    write_read_rows(Order, ORDER_COLUMNS, new_rows, changed_rows, update)
    if compare:
        store_new_bytes(comparison)
    if refreshed and unchanged_ids:
        # A lookup stamps every order it returned, changed or not: the refresh queue is
        # ordered by refreshed_at, and changed_at keeps meaning "the record changed".
        Order.objects.filter(pk__in=unchanged_ids).update(refreshed_at=now)
    return result


def customer_row(customer: ParsedCustomer, now: datetime, *, using: str | None = None) -> Customer:
    """The customer as the mirror stores it, as a model instance that behaves like one read
    from the database (``using``: that database; the app's database if not given).

    The one place that maps a parsed customer to its row's values, shared by the mirror's
    readers and ``create_order``'s insert-if-absent.
    """
    instance = Customer(
        id=customer.id,
        guest=customer.guest,
        name=customer.name,
        email_address=customer.email_address,
        phone_number=customer.phone_number,
        raw=customer.raw,
        fingerprint=customer.fingerprint,
        wire_fingerprint=customer.wire_fingerprint,
        first_seen_at=now,
        changed_at=now,
    )
    return _as_stored(instance, using)


def order_row(
    order: ParsedOrder, now: datetime, *, refreshed: bool = False, using: str | None = None
) -> Order:
    """The order as the mirror stores it, as a model instance that behaves like one read from
    the database; ``refreshed`` (a lookup) also stamps ``refreshed_at``. See ``customer_row``.
    """
    instance = Order(
        id=order.id,
        status=order.status,
        initiated_at=order.initiated_at,
        completed_at=order.completed_at,
        customer_id=order.customer.id,
        total=order.total,
        currency=order.currency,
        number=order.number,
        payment_url=order.payment_url,
        paid_at=order.paid_at,
        canceled_at=order.canceled_at,
        expires_at=order.expires_at,
        raw=order.raw,
        fingerprint=order.fingerprint,
        wire_fingerprint=order.wire_fingerprint,
        first_seen_at=now,
        changed_at=now,
        refreshed_at=now if refreshed else None,
    )
    return _as_stored(instance, using)


def _as_stored(instance: _Row, using: str | None) -> _Row:
    instance._state.adding = False  # as if read back: it is (or will be) the stored row
    # The database it was written to, not the router's read database (a replica, perhaps).
    instance._state.db = using or app_database()
    return instance


def _store_customers(
    customers: dict[str, ParsedCustomer],
    stored: dict[str, StoredCustomer],
    now: datetime,
    *,
    compared: bool,
) -> None:
    """Write the customers that differ from the ``stored`` ones (all of them when nothing is
    stored). When ``stored`` is what a read in this transaction found (``compared``), the
    absent ones are known to be new and go in as ``write_read_rows`` inserts them; otherwise
    all go through the upsert."""
    rows = [
        (
            c.id,
            c.guest,
            c.name,
            c.raw_json,
            c.fingerprint,
            c.wire_fingerprint,
            now,
            now,
            c.email_address,
            c.phone_number,
        )
        for c in customers.values()
        if not is_stored(c, stored.get(c.id))
    ]
    if not compared:
        upsert(Customer, CUSTOMER_COLUMNS, rows, CUSTOMER_UPDATE)
        return
    absent = [row for row in rows if row[0] not in stored]
    changed = [row for row in rows if row[0] in stored]
    write_read_rows(Customer, CUSTOMER_COLUMNS, absent, changed, CUSTOMER_UPDATE)


def store_records(
    resource: str, parsed_records: Sequence[ParsedRecord], *, now: datetime | None = None
) -> MirrorResult:
    """Upsert raw records of another resource into ``RemoteRecord``: at most two statements."""
    now = now or timezone.now()
    result = MirrorResult()
    records: dict[str, ParsedRecord] = {}
    for record in parsed_records:
        records.setdefault(record.id, record)
    if not records:
        return result
    # One SELECT on the (resource, remote_id) unique index; a page is at most a few hundred ids.
    # On the database the page is written to, inside its transaction (not on a read replica).
    stored = dict(
        RemoteRecord.objects.using(app_database())
        .filter(resource=resource, remote_id__in=list(records))
        .values_list("remote_id", "fingerprint")
    )
    rows: list[tuple] = []
    for record in records.values():
        previous = stored.get(record.id)
        if previous == record.fingerprint:
            result.unchanged += 1
            continue
        if previous is None:
            result.created += 1
        else:
            result.updated += 1
        rows.append((resource, record.id, record.raw_json, record.fingerprint, now, now))
    upsert(RemoteRecord, RECORD_COLUMNS, rows, RECORD_UPDATE, conflict=RECORD_CONFLICT)
    return result
