"""An ``/orders/page`` answer as typed msgspec structs: one pass in C, no dict per object.

A body decodes here only if its values are exactly those ``json.loads`` reads (every object
known field by field, every number an integer); else ``decode_orders_page`` returns ``None``
and Python decodes it. Why, and the exactness rules: docs/architecture/sync.md ("Parsing").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

from .decoding import _UNSTORABLE, _plain_json

__all__ = [
    "LightOrder",
    "LightPageStruct",
    "OrderStruct",
    "OrdersPageStruct",
    "customer_ids",
    "decode_light_page",
    "decode_orders_page",
    "order_slices",
    "to_records",
]

logger = logging.getLogger("django_orders.client")

# Every field is optional (``UNSET`` when absent) and nullable: the schema's job is to describe
# what a record holds, exactly; what the mirror requires of it is checked by the parser, with
# the messages of a record Python decoded. Nothing here has a default other than UNSET: a
# default of None would make an absent field and a null one the same, and change the canonical
# text.


class _Schema(Struct, gc=False, forbid_unknown_fields=True):
    pass


class Money(_Schema):
    currency: str | UnsetType | None = UNSET
    value: int | UnsetType | None = UNSET


class Product(_Schema):
    id: str | UnsetType | None = UNSET
    name: str | UnsetType | None = UNSET
    type: str | UnsetType | None = UNSET
    price: Money | UnsetType | None = UNSET
    quantity: int | UnsetType | None = UNSET


class Charge(_Schema):
    """A fee (``label``, ``description``, ``amount``) or shipping (``label``, ``fee``) item."""

    id: str | UnsetType | None = UNSET
    label: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    amount: Money | UnsetType | None = UNSET
    fee: Money | UnsetType | None = UNSET


class LineItem(_Schema):
    type: str | UnsetType | None = UNSET
    product: Product | UnsetType | None = UNSET
    fee: Charge | UnsetType | None = UNSET
    shipping: Charge | UnsetType | None = UNSET


class LineItemGroup(_Schema):
    line_items: list[LineItem] | UnsetType | None = UNSET
    total: Money | UnsetType | None = UNSET


class Link(_Schema):
    url: str | UnsetType | None = UNSET


class InvoiceFormats(_Schema):
    web: Link | UnsetType | None = UNSET
    pdf: Link | UnsetType | None = UNSET


class Invoice(_Schema):
    number: str | UnsetType | None = UNSET
    format: InvoiceFormats | UnsetType | None = UNSET


class CustomerStruct(_Schema):
    id: str | UnsetType | None = UNSET
    guest: bool | UnsetType | None = UNSET
    name: str | UnsetType | None = UNSET
    email_address: str | UnsetType | None = UNSET
    phone_number: str | UnsetType | None = UNSET


#: ``custom_data`` is the shop's own: any JSON without floats, nested at most this deep inside
#: it (``decoding.PLAIN_DEPTH`` counts from the body: the envelope and the record are 4 levels).
CUSTOM_DATA_DEPTH = 8
if TYPE_CHECKING:
    _CustomData = Any
else:
    _CustomData = _plain_json(CUSTOM_DATA_DEPTH)


class OrderStruct(_Schema):
    id: str | UnsetType | None = UNSET
    number: str | UnsetType | None = UNSET
    status: str | UnsetType | None = UNSET
    initiated_at: str | UnsetType | None = UNSET
    sealed_at: str | UnsetType | None = UNSET
    completed_at: str | UnsetType | None = UNSET
    paid_at: str | UnsetType | None = UNSET
    canceled_at: str | UnsetType | None = UNSET
    expires_at: str | UnsetType | None = UNSET
    customer: CustomerStruct | UnsetType | None = UNSET
    line_item_group: LineItemGroup | UnsetType | None = UNSET
    invoice: Invoice | UnsetType | None = UNSET
    custom_data: Union[_CustomData, UnsetType] = UNSET  # noqa: UP007 (a runtime type)


class _OrdersPage(_Schema):
    orders: list[OrderStruct]
    number: int | UnsetType = UNSET
    size: int | UnsetType = UNSET


class OrdersPageStruct(_Schema):
    """The envelope ``{"page": {"number": ..., "size": ..., "orders": [...]}}``."""

    page: _OrdersPage


_DECODER = msgspec.json.Decoder(OrdersPageStruct)


def decode_orders_page(body: bytes) -> OrdersPageStruct | None:
    """``body`` as typed structs, or ``None`` if the schema cannot vouch for it (module docs)."""
    # The pattern begins with a literal, which the regular expression engine finds at memory
    # speed (faster than a substring test of its own would).
    if _UNSTORABLE.search(body):
        return None  # NUL and lone surrogates are replaced by the Python decoder's path
    try:
        return _DECODER.decode(body)
    except (msgspec.DecodeError, ValueError, RecursionError) as exc:
        # Says where and which field or type, never a value: what to add to the schema if the
        # service's records grew a field (such pages are only slower, never wrong).
        logger.debug("Orders page decoded without the order schema: %s", str(exc)[:200])
        return None


def to_records(orders: list[OrderStruct]) -> list[dict[str, Any]]:
    """The records as ``json.loads`` would have read them (the same values; keys in the
    schema's order), for the paths that take dicts."""
    records: list[dict[str, Any]] = msgspec.to_builtins(orders)
    return records


# --- what a walk reads before it knows whether a record changed --------------------------------
# Why: in a re-sync nearly every order is the one the mirror holds, byte for byte
# (``Order.wire_fingerprint``), and decoding it into the schema's structs would be much of
# what such an order costs (figures: benchmarks/README.md). These decoders are lenient on
# purpose (unknown fields skipped, any type taken): they read the few fields a walk compares
# and each record's bytes, and check the envelope as the schema does. Whether a record fits the
# schema is decided by ``decode_orders_page`` on the same body, when a record turns out to need
# more than its bytes (``mirror.deferred_pages``). msgspec reads duplicate keys the same way in
# every decoder (the last one wins), so these are the values and bytes the typed decoder reads.


class LightOrder(Struct, gc=False):
    """An order as a walk first reads it: the fields it compares, its customer as bytes."""

    id: Any = None
    status: Any = None
    initiated_at: Any = None
    #: The customer's bytes exactly as sent (a view of the body); empty when absent.
    customer: msgspec.Raw = msgspec.Raw(b"")
    #: The refunds it carries, as bytes (a view of the body); empty when absent. Read while the
    #: record is skipped anyway, so a page without refunds costs nothing to look for them in.
    refunds: msgspec.Raw = msgspec.Raw(b"")


class _LightPage(Struct, gc=False, forbid_unknown_fields=True):
    orders: list[LightOrder]
    number: int | UnsetType = UNSET
    size: int | UnsetType = UNSET


class LightPageStruct(Struct, gc=False, forbid_unknown_fields=True):
    """The envelope as ``OrdersPageStruct`` checks it, its orders read as ``LightOrder``."""

    page: _LightPage

    def echoes(self) -> dict[str, Any]:
        """The page's ``number`` and ``size`` as the dict checks read them (absent: absent)."""
        page = self.page
        return {
            name: value
            for name, value in (("number", page.number), ("size", page.size))
            if value is not UNSET
        }


class _CustomerId(Struct, gc=False):
    id: Any = None


class _WireOrders(Struct, gc=False):
    orders: list[msgspec.Raw]


class _WireEnvelope(Struct, gc=False):
    page: _WireOrders


_LIGHT_DECODER = msgspec.json.Decoder(LightPageStruct)
_CUSTOMER_IDS = msgspec.json.Decoder(list[_CustomerId])
_ORDER_SLICES = msgspec.json.Decoder(_WireEnvelope)


def decode_light_page(body: bytes) -> LightPageStruct | None:
    """``body`` read as ``LightOrder``s, or ``None`` where it is to be decoded as any other
    answer: not JSON, an envelope the schema does not know, a record that is not an object, or
    text no column stores (NUL, lone surrogates: the Python decoder's path replaces them).

    What it skips it checks only for JSON's grammar: text that is not UTF-8 or nesting past
    ``MAX_JSON_DEPTH`` inside a record is found when the record is decoded
    (``mirror.bulk_pages.parse_body``). About a microsecond an order, against two and a half
    for the typed decode (in C both).
    """
    if _UNSTORABLE.search(body):
        return None
    try:
        return _LIGHT_DECODER.decode(body)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None


def customer_ids(orders: list[LightOrder]) -> list[Any] | None:
    """Each order's customer's ``id`` (``None`` if it has none), read in one call for the
    page; ``None`` if any order's customer is absent or not an object, or its bytes are not
    UTF-8 (the light reading skips them unread)."""
    customers = [order.customer for order in orders]
    if not all(customers):  # an empty Raw: no "customer" key
        return None
    try:
        found = _CUSTOMER_IDS.decode(b"[" + b",".join(customers) + b"]")
    except ValueError:  # msgspec.DecodeError, UnicodeDecodeError
        return None
    return [customer.id for customer in found]


def order_slices(body: bytes) -> list[msgspec.Raw]:
    """Each order's bytes exactly as they are in ``body`` (a body ``decode_light_page`` read),
    in the order of its ``orders``: one pass in C. A ``Raw`` is a view of ``body``: it keeps
    the body alive, and hashes as the bytes it covers."""
    return _ORDER_SLICES.decode(body).page.orders
