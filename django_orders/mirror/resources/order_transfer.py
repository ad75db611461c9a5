"""A walk's page of orders read in full in a helper process (``read_shipped``), and rebuilt
in the sync's (``rebuilt``) as the reading thread would have made it. Imports nothing that
needs Django's settings or app registry. Why: docs/architecture/sync.md, "The parsing process".
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
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


#: An order's values a row carries, in order: set again by these names on the rebuilt order.
_ORDER = (
    "id",
    "status",
    "initiated_at",
    "completed_at",
    "paid_at",
    "canceled_at",
    "expires_at",
    "total",
    "currency",
    "number",
    "payment_url",
    "raw_json",
    "fingerprint",
    "wire_fingerprint",
)
#: Its customer's values, read by these names ...
_CUSTOMER = ("id", "guest", "name", "email_address", "phone_number", "raw_json", "fingerprint")
#: ... and set by these (its text and fingerprint are kept where ``ParsedCustomer`` keeps them).
_CUSTOMER_SLOTS = ("id", "guest", "name", "email_address", "phone_number", "_json", "_fingerprint")
#: What a row holds: the helper answers only a sync that reads rows as it writes them
#: (``sync.parse_process.reader_version``).
LAYOUT = (_ORDER, _CUSTOMER, _CUSTOMER_SLOTS)
_order_values = attrgetter(*_ORDER)
_customer_values = attrgetter(*_CUSTOMER, "wire_fingerprint")


def _order_row(order: Any) -> tuple:
    """``(index on its page, its values, its refunds as bytes, its customer's values)``."""
    if type(order) is LazyOrder:
        refunds = bytes(order.refunds_bytes)
    else:  # parsed at once (not vouched by the light reading): its refunds from the record
        carried = order.raw.get("refunds")
        refunds = b"" if carried is None else _encode(carried)
    index = getattr(order, "_index", 0)
    return index, _order_values(order), refunds, _customer_values(order.customer)


def rebuilt(shipped: tuple, page_number: int, resource: str, count: int) -> LenientPage:
    """In the sync's process: ``read_shipped``'s answer for a page of ``count`` records as the
    orders it read, each read in full (``LazyOrder`` with nothing left to read)."""
    rows, set_aside = shipped
    page = PageOf(page_number, resource, count, any(refunds for _, _, refunds, _ in rows))
    orders = [_order(row, page) for row in rows]
    return LenientPage(orders, [(where, InvalidRecord(message)) for where, message in set_aside])


def _order(row: tuple, page: PageOf) -> LazyOrder:
    index, values, refunds, customer_values = row
    order = LazyOrder.__new__(LazyOrder)
    # Unpacked into the slots by hand, in the order of ``_ORDER`` and ``_CUSTOMER_SLOTS``: half
    # the time of a ``setattr`` a name, on the parsing thread, for every order of a first sync.
    # (A field out of order fails tests/sync/test_parse_process.py.)
    (
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
    ) = values
    order._index = index
    order.refunds_bytes = msgspec.Raw(refunds)
    order._raw = None  # decoded from raw_json if a signal receiver asks (``ParsedOrder.raw``)
    order._bytes = None
    order._page = page
    customer = order.customer = LazyCustomer.__new__(LazyCustomer)
    (
        customer.id,
        customer.guest,
        customer.name,
        customer.email_address,
        customer.phone_number,
        customer._json,
        customer._fingerprint,
        customer.wire_fingerprint,
    ) = customer_values
    customer._raw = None
    customer._plain = False
    customer._bytes = None
    return order
