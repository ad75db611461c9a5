"""The row mapping of orders and customers: a parsed record as the model instance the mirror
stores, built the same way by every writer and by ``MirrorResult.orders``."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from ..db import app_database
from ..models.mirror import Customer, Order
from .parsed import ORDER_FIELDS, ParsedCustomer, ParsedOrder

_Row = TypeVar("_Row", Customer, Order)


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
    order: ParsedOrder,
    now: datetime,
    *,
    refreshed: bool = False,
    observed_at: datetime | None = None,
    using: str | None = None,
) -> Order:
    """The order as the mirror stores it, as a model instance that behaves like one read from
    the database; ``refreshed`` (a lookup) also stamps ``refreshed_at``; ``observed_at``: when
    the request it answers was sent. See ``customer_row``.
    """
    instance = Order(
        id=order.id,
        **{name: getattr(order, name) for name in ORDER_FIELDS},
        customer_id=order.customer.id,
        raw=order.raw,
        fingerprint=order.fingerprint,
        wire_fingerprint=order.wire_fingerprint,
        first_seen_at=now,
        changed_at=now,
        refreshed_at=now if refreshed else None,
        observed_at=observed_at,
    )
    return _as_stored(instance, using)


def _as_stored(instance: _Row, using: str | None) -> _Row:
    instance._state.adding = False  # as if read back: it is (or will be) the stored row
    # The database it was written to, not the router's read database (a replica, perhaps).
    instance._state.db = using or app_database()
    return instance
