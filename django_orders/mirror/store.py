"""The one write route into the mirror: pages, lookups, confirm/cancel and create answers.

``store_orders`` writes a page in a fixed number of statements (a locked read, then the changed
customers and orders), applying the lifecycle rule once; ``store_created`` inserts a create's
answer only where the mirror has no row. Why: docs/architecture/sync.md, "Writing a page".

The lifecycle rule: the mirror never goes back in time. Status only moves forward; with no
move, the answer to the later request wins; applied to every order write, on the row locked in
the write's transaction. The rule in full: docs/architecture/sync.md, "The mirror never goes
back in time".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from operator import attrgetter

from django.db import connections
from django.db.models import Case, F, Q, Value, When
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery
from django.utils import timezone

from ..db import app_database
from ..models.mirror import Customer, Order, OrderStatus, RemoteRecord
from ..models.outbox import EventType
from . import events
from .comparison import (
    Comparison,
    StoredCustomer,
    compare_orders,
    is_stored,
    new_bytes,
)
from .events import PAGE, Origin
from .parsed import ORDER_FIELDS, ParsedCustomer, ParsedOrder, ParsedRecord
from .result import MirrorResult as MirrorResult
from .rows import customer_row as customer_row
from .rows import order_row
from .upsert import upsert, write_read_rows
from .wire_match import store_wire_fingerprints

#: How far along its lifecycle a status is. Canceled and expired share a rank: neither follows
#: the other. Statuses not listed (``unknown``, any other string) have no rank.
RANKS: dict[str, int] = {
    OrderStatus.PREPARING: 0,
    OrderStatus.REQUIRES_PAYMENT: 1,
    OrderStatus.CANCELED: 2,
    OrderStatus.EXPIRED: 2,
    OrderStatus.PAID: 3,
    OrderStatus.COMPLETED: 4,
}
#: The first rank of a final status: an unknown status never replaces one.
FINAL_RANK = 2
#: Timestamps that only ever appear: a write never clears one the mirror holds (``upsert``).
APPEARING = ("paid_at", "canceled_at", "completed_at")

#: When the request an answer came from was sent: one moment for all its orders (a page), or
#: each order's own by id (a batch of lookups, each its own request).
SentAt = datetime | Mapping[str, datetime]


def sent_for(sent_at: SentAt, order_id: str) -> datetime:
    """When the request that answered with ``order_id`` was sent."""
    return sent_at if isinstance(sent_at, datetime) else sent_at[order_id]


def replaces(
    status: str,
    sent_at: datetime,
    stored_status: str,
    stored_observed_at: datetime | None,
) -> bool:
    """Whether an answer with ``status``, to a request sent at ``sent_at``, may replace the
    stored row (its status, and when its own request was sent: ``None`` for a row stored
    before the mirror kept it, which any answer may replace that the lifecycle allows)."""
    new, old = RANKS.get(status), RANKS.get(stored_status)
    if new is not None and old is not None:
        if new != old:
            return new > old
    elif new is None and old is not None and old >= FINAL_RANK:
        return False
    return stored_observed_at is None or sent_at >= stored_observed_at


def observed(sent_at: datetime, stored_observed_at: datetime | None) -> datetime:
    """The ``observed_at`` of a row an answer replaced: never earlier than the row's (an answer
    that moved the status forward may be older than the row it replaced)."""
    if stored_observed_at is None or sent_at > stored_observed_at:
        return sent_at
    return stored_observed_at


def confirmed_observed_at(sent_at: SentAt, order_ids: Sequence[str]) -> Case:
    """The ``observed_at`` of rows an answer found unchanged: its request's moment where the
    row's is older (one ``CASE`` for all of them; one branch an order for a batch of lookups)."""
    older = Q(observed_at__isnull=True)
    if isinstance(sent_at, datetime):
        whens = [When(older | Q(observed_at__lt=sent_at), then=Value(sent_at))]
    else:
        whens = [
            When(Q(pk=pk) & (older | Q(observed_at__lt=sent_at[pk])), then=Value(sent_at[pk]))
            for pk in order_ids
        ]
    return Case(*whens, default=F("observed_at"))


#: The ``Order`` columns a write sets: its fields as ``ParsedOrder`` declares them
#: (``parsed.ORDER_FIELDS``), then what the mirror adds. ``order_values`` reads the former.
ORDER_COLUMNS = (
    "id",
    *ORDER_FIELDS,
    "customer",
    "raw",
    "fingerprint",
    "wire_fingerprint",
    "first_seen_at",
    "changed_at",
    "refreshed_at",
    "observed_at",
)
ORDER_UPDATE = (
    *ORDER_FIELDS,
    "customer",
    "raw",
    "fingerprint",
    "wire_fingerprint",
    "changed_at",
    "observed_at",
)
order_values = attrgetter(*ORDER_FIELDS)
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

logger = logging.getLogger("django_orders.sync")


def store_orders(
    parsed_orders: Sequence[ParsedOrder],
    *,
    now: datetime | None = None,
    sent_at: SentAt | None = None,
    refreshed: bool = False,
    compare: bool = True,
    known_customers: set[str] | None = None,
    origin: Origin = PAGE,
) -> MirrorResult:
    """Upsert orders and their customers; records repeated in ``parsed_orders`` count once.

    ``sent_at`` is when the request they answer was sent (``now`` if not given): an order the
    mirror holds in a newer state (``lifecycle.replaces``, decided on the stored row locked in
    this transaction) is not written, and counted in ``kept``; timestamps that only ever appear
    are never cleared (``lifecycle.APPEARING``). Each written order's ``observed_at`` says when
    its answer's request was sent. A batch of lookups gives each order's own, by id.

    ``refreshed=True`` (a lookup by id) also stamps ``refreshed_at``, even on unchanged orders,
    because the refresh queue is ordered by it. ``compare=False`` skips reading the stored
    fingerprints and writes every record through the upsert (one statement fewer): for an order
    that was just created upstream, which is new but for a rare replay; every record then counts
    as created, and nothing stored is known to weigh it against (``lifecycle`` is not applied).

    ``known_customers`` (used by a page walk) holds the ids of customers already written from a
    newer order earlier in the same walk: their copies in older orders are not written again.
    Orders embed a customer summary whose optional fields vary from order to order, so letting
    every copy overwrite the row would rewrite it on every run; the newest copy wins instead.
    The ids of this call's customers are added to the set.

    Each status change it writes is recorded on the order's timeline with ``origin`` (a page of
    a walk by default), in one statement for the call; an order first stored records nothing.
    """
    now = now or timezone.now()
    sent_at = sent_at or now
    result = MirrorResult(now=now, refreshed=refreshed, row=order_row)
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
    kept_ids: list[str] = []
    for order in orders.values():
        previous = stored.get(order.id)
        if is_stored(order, previous):
            result.unchanged += 1
            unchanged_ids.append(order.id)
            continue
        observed_at = sent = sent_for(sent_at, order.id)
        if previous is not None:
            if not replaces(order.status, sent, previous.status, previous.observed_at):
                logger.info(
                    "Order %s: kept as stored (%s) over an older answer (%s): mirror.store",
                    order.id,
                    previous.status,
                    order.status,
                )
                result.unchanged += 1
                result.kept += 1
                kept_ids.append(order.id)
                continue
            observed_at = observed(sent, previous.observed_at)
        # Without the read (compare=False) nothing is known to be absent: all go to the upsert.
        (new_rows if compare and previous is None else changed_rows).append(
            (
                order.id,
                *order_values(order),
                order.customer.id,
                order.raw_json,
                order.fingerprint,
                order.wire_fingerprint,
                now,
                now,
                now if refreshed else None,
                observed_at,
            )
        )
        result._written.append((order, None if previous is None else previous.status, observed_at))
        if previous is None:
            result.created += 1
        else:
            result.updated += 1
    update = (*ORDER_UPDATE, "refreshed_at") if refreshed else ORDER_UPDATE
    meanwhile = write_read_rows(
        Order, ORDER_COLUMNS, new_rows, changed_rows, update, keep=APPEARING, guard=True
    )
    # Taken before _decide_again, which records its own (it decides on rows read absent).
    changes = [
        (order.id, previous)
        for order, previous, _observed in result._written
        if previous is not None and previous != order.status
    ]
    # Orders new to the mirror: ``order.first_seen`` (sent only to endpoints that name it).
    first_seen = [
        order.id
        for order, previous, _observed in result._written
        if previous is None and order.id not in set(meanwhile or ())
    ]
    if meanwhile:
        _decide_again(result, [orders[pk] for pk in meanwhile], sent_at, refreshed, origin)
    if changes or first_seen:
        events.record(
            (
                events.order_status_change(result.orders[pk], previous, origin=origin, at=now)
                for pk, previous in changes
            ),
            also=[
                events.order_event(EventType.ORDER_FIRST_SEEN, result.orders[pk])
                for pk in first_seen
            ],
        )
    if compare:
        store_new_bytes(comparison)
    if refreshed and unchanged_ids:
        # A lookup stamps every order it returned, changed or not: the refresh queue is
        # ordered by refreshed_at, and changed_at keeps meaning "the record changed". An
        # unchanged answer also says the stored state held when its request was sent.
        Order.objects.filter(pk__in=unchanged_ids).update(
            refreshed_at=now, observed_at=confirmed_observed_at(sent_at, unchanged_ids)
        )
    if refreshed and kept_ids:
        Order.objects.filter(pk__in=kept_ids).update(refreshed_at=now)
    return result


def _decide_again(
    result: MirrorResult,
    orders: list[ParsedOrder],
    sent_at: SentAt,
    refreshed: bool,
    origin: Origin,
) -> None:
    """Orders read as absent that another transaction stored before this one's write, which
    left them as stored (``upsert``'s ``insert_only``): stored again, now read and locked as
    stored rows, so the lifecycle decides and only what this write changed is announced."""
    ids = {order.id for order in orders}
    logger.info("Orders %s: stored by another process meanwhile; decided again", sorted(ids))
    result._written = [entry for entry in result._written if entry[0].id not in ids]
    result.created -= len(ids)
    again = store_orders(
        orders, now=result.now, sent_at=sent_at, refreshed=refreshed, origin=origin
    )
    result.created += again.created
    result.updated += again.updated
    result.unchanged += again.unchanged
    result.kept += again.kept
    result._written.extend(again._written)


def store_created(
    parsed: ParsedOrder, *, now: datetime, observed_at: datetime, using: str
) -> Order:
    """Write a create's answer: the customer and the order inserted only where the mirror has
    no row, never overwriting one (a replay may be as old as the key's first use; the stored
    row is as new or newer). Returns the order as stored: the mirror's row for a replay."""
    customer = customer_row(parsed.customer, now, using=using)
    order = order_row(parsed, now, observed_at=observed_at, using=using)
    if insert_if_absent(customer, using):
        # Cached as select_related caches it (assigning would ask the routers'
        # allow_relation): readers of ``order.customer`` then need no query, which a router
        # could send to a replica that lacks the row yet. A stored customer is left to be read.
        Order._meta.get_field("customer").set_cached_value(order, customer)
    if insert_if_absent(order, using):
        return order
    return Order.objects.using(using).select_related("customer").get(pk=parsed.id)


def insert_if_absent(instance: Customer | Order, using: str) -> bool:
    """One ``INSERT ... ON CONFLICT DO NOTHING``; True when the row was inserted. The row count
    tells a replay from a new order without a second query (``bulk_create`` hides it)."""
    model = type(instance)
    query = InsertQuery(model, on_conflict=OnConflict.IGNORE)
    query.insert_values(model._meta.concrete_fields, [instance])
    [(sql, params)] = query.get_compiler(using=using).as_sql()
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


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


def store_new_bytes(comparison: Comparison) -> None:
    """Record the wire fingerprint of each order and customer of ``comparison`` found unchanged
    though it came in other bytes (``comparison.new_bytes``): at most one statement a table,
    nothing else of the row written. Without it such a record would be read and compared on
    every re-sync, after the service changed how it writes its JSON."""
    store_wire_fingerprints(Order, new_bytes(comparison.orders, comparison.stored))
    store_wire_fingerprints(Customer, new_bytes(comparison.customers, comparison.stored_customers))


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
