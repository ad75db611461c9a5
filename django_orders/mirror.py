"""Writing parsed upstream orders into the mirror with a fixed number of statements.

Used by the page sync (one call per page), by lookups (refresh) and by ``create_order`` (one
order). Whatever the number of records, a call runs exactly four statements: read the stored
fingerprints of the customers, upsert the new or changed customers, the same for the orders.
Rows whose fingerprint did not change are not written at all, so a re-sync of unchanged data
writes nothing and ``changed_at`` means what it says.

The caller owns the transaction (one short transaction per page or per lookup).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from .models import Customer, Order
from .parsing import ParsedCustomer, ParsedOrder


@dataclass
class MirrorResult:
    """What a write did. ``first_seen`` and ``status_changes`` feed the signals."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    orders: dict[str, Order] = field(default_factory=dict)
    first_seen: list[Order] = field(default_factory=list)
    status_changes: list[tuple[Order, str]] = field(default_factory=list)


def store_orders(
    parsed_orders: list[ParsedOrder],
    *,
    now: datetime | None = None,
    refreshed: bool = False,
    compare: bool = True,
) -> MirrorResult:
    """Upsert orders and their customers; records repeated in ``parsed_orders`` count once.

    ``refreshed=True`` (a lookup by id) also stamps ``refreshed_at``, even on unchanged orders,
    because the refresh queue is ordered by it. ``compare=False`` skips reading the stored
    fingerprints and writes every record (two statements instead of four): for an order that was
    just created upstream, which is new but for a rare replay; every record then counts as
    created.
    """
    now = now or timezone.now()
    result = MirrorResult()
    orders: dict[str, ParsedOrder] = {}
    for order in parsed_orders:
        orders.setdefault(order.id, order)  # newest first: the first copy is the newest
    if not orders:
        return result
    customers: dict[str, ParsedCustomer] = {}
    for order in orders.values():
        customers.setdefault(order.customer.id, order.customer)
    _store_customers(customers, now, compare=compare)

    stored = (
        {}
        if not compare
        else {
            pk: (stored_fingerprint, status)
            for pk, stored_fingerprint, status in Order.objects.filter(
                pk__in=list(orders)
            ).values_list("pk", "fingerprint", "status")
        }
    )
    to_write: list[Order] = []
    for order in orders.values():
        previous = stored.get(order.id)
        instance = Order(
            id=order.id,
            status=order.status,
            initiated_at=order.initiated_at,
            completed_at=order.completed_at,
            customer_id=order.customer.id,
            raw=order.raw,
            fingerprint=order.fingerprint,
            first_seen_at=now,
            changed_at=now,
            refreshed_at=now if refreshed else None,
        )
        result.orders[order.id] = instance
        if previous is None:
            result.created += 1
            result.first_seen.append(instance)
            to_write.append(instance)
        elif previous[0] != order.fingerprint:
            result.updated += 1
            if previous[1] != order.status:
                result.status_changes.append((instance, previous[1]))
            to_write.append(instance)
        else:
            result.unchanged += 1
    if to_write:
        Order.objects.bulk_create(
            to_write,
            update_conflicts=True,
            unique_fields=["id"],
            update_fields=[
                "status",
                "initiated_at",
                "completed_at",
                "customer",
                "raw",
                "fingerprint",
                "changed_at",
            ],
        )
    if refreshed:
        # A lookup stamps every order it returned, changed or not: the refresh queue is
        # ordered by refreshed_at, and changed_at keeps meaning "the record changed".
        Order.objects.filter(pk__in=list(orders)).update(refreshed_at=now)
    return result


def _store_customers(customers: dict[str, ParsedCustomer], now: datetime) -> None:
    stored = dict(Customer.objects.filter(pk__in=list(customers)).values_list("pk", "fingerprint"))
    changed = [
        Customer(
            id=c.id,
            guest=c.guest,
            name=c.name,
            raw=c.raw,
            fingerprint=c.fingerprint,
            first_seen_at=now,
            changed_at=now,
        )
        for c in customers.values()
        if stored.get(c.id) != c.fingerprint
    ]
    if changed:
        Customer.objects.bulk_create(
            changed,
            update_conflicts=True,
            unique_fields=["id"],
            update_fields=["guest", "name", "raw", "fingerprint", "changed_at"],
        )
