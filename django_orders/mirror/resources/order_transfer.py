"""A walk's page of orders read in full in a helper process, and rebuilt in the sync's.

``read_shipped`` runs in the helper (``sync.parse_process``): the page read as the walk reads
it (``order_pages``), every order in full, as plain tuples that cost little to send. The
sync's process rebuilds them (``rebuilt``) as orders read in full, so the writer sees what a
page read on its own thread gives. Why a process: docs/architecture/sync.md, "The parsing
process". This module imports nothing that needs Django's settings or app registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ...exceptions.wire import InvalidRecord
from ..parsing import LenientPage
from .order_pages import LazyCustomer, LazyOrder, PageOf, complete, read_orders

_encode = msgspec.json.encode


def read_shipped(records: Sequence[bytes], page_number: int, resource: str) -> tuple:
    """In the helper: the page's orders read in full, as ``(orders, set_aside)``: one tuple an
    order (``_order_row``), and ``(where, message)`` for each malformed record."""
    raw = [msgspec.Raw(record) for record in records]
    page = read_orders(raw, page_number=page_number, resource=resource)
    kept, malformed = complete(page)
    set_aside = [(where, str(exc)) for where, exc in (*page.set_aside, *malformed)]
    return [_order_row(order) for order in kept], set_aside


#: Where ``_order_row`` puts the refunds' bytes.
_REFUNDS = 15


def _order_row(order: Any) -> tuple:
    customer = order.customer
    if type(order) is LazyOrder:
        refunds = bytes(order.refunds_bytes)
    else:  # parsed at once (not vouched by the light reading): its refunds from the record
        carried = order.raw.get("refunds")
        refunds = b"" if carried is None else _encode(carried)
    return (
        getattr(order, "_index", 0),
        order.id,
        order.status,
        order.initiated_at,
        order.completed_at,
        order.paid_at,
        order.canceled_at,
        order.expires_at,
        order.total,
        order.currency,
        order.number,
        order.payment_url,
        order.raw_json,
        order.fingerprint,
        order.wire_fingerprint,
        refunds,
        customer.id,
        customer.guest,
        customer.name,
        customer.email_address,
        customer.phone_number,
        customer.raw_json,
        customer.fingerprint,
        customer.wire_fingerprint,
    )


def rebuilt(shipped: tuple, page_number: int, resource: str, count: int) -> LenientPage:
    """In the sync's process: ``read_shipped``'s answer for a page of ``count`` records as the
    orders it read, each read in full (``LazyOrder`` with nothing left to read)."""
    rows, set_aside = shipped
    page = PageOf(page_number, resource, count, any(row[_REFUNDS] for row in rows))
    orders = [_order(row, page) for row in rows]
    return LenientPage(orders, [(where, InvalidRecord(message)) for where, message in set_aside])


def _order(row: tuple, page: PageOf) -> LazyOrder:
    order = LazyOrder.__new__(LazyOrder)
    (
        order._index,
        order.id,
        order.status,
        order.initiated_at,
        order.completed_at,
        order.paid_at,
        order.canceled_at,
        order.expires_at,
        order.total,
        order.currency,
        order.number,
        order.payment_url,
        order.raw_json,
        order.fingerprint,
        order.wire_fingerprint,
        refunds,
        *customer_values,
    ) = row
    order.refunds_bytes = msgspec.Raw(refunds)
    order._raw = None  # decoded from raw_json if a signal receiver asks (``ParsedOrder.raw``)
    order._bytes = None
    order._page = page
    order.customer = _customer(*customer_values)
    return order


def _customer(
    customer_id: str,
    guest: bool,
    name: str,
    email_address: str,
    phone_number: str,
    raw_json: str,
    fingerprint: str,
    wire_fingerprint: str,
) -> LazyCustomer:
    customer = LazyCustomer.__new__(LazyCustomer)
    customer.id = customer_id
    customer.guest = guest
    customer.name = name
    customer.email_address = email_address
    customer.phone_number = phone_number
    customer.wire_fingerprint = wire_fingerprint
    customer._json = raw_json
    customer._fingerprint = fingerprint
    customer._raw = None
    customer._plain = False
    customer._bytes = None
    return customer
