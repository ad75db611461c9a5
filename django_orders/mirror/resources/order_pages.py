"""How the walk reads a page of orders: its wire schema (``LightOrder``) and its one decode path.

Each order is first read only as far as the walk compares it (id, status, customer id, the
hash of its bytes and of its customer's): an order the mirror holds byte for byte is never
decoded. Any other order is decoded and parsed by ``parse_order``, as lookups and create
answers are, the first time more of it is needed (``LazyOrder.read``). Why: docs/architecture/
sync.md, "Parsing".
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from ...exceptions.wire import InvalidRecord
from ...wire_json import decode_answer, has_unstorable_escape
from ..parsing import (
    LenientPage,
    ParsedCustomer,
    ParsedOrder,
    decode_record,
    parse_customer,
    parse_order,
    parse_orders,
    read_records,
    record_position,
)

# --- the wire schema: what a walk reads of an order before it knows whether it changed ---------


class LightOrder(msgspec.Struct, gc=False):
    """An order as a walk first reads it: the fields it compares, its customer and refunds as
    the bytes they came in (empty when absent). Lenient on purpose (any type, unknown fields
    skipped): ``parse_order`` decides what a record must be."""

    id: Any = None
    status: Any = None
    initiated_at: Any = None
    customer: msgspec.Raw = msgspec.Raw(b"")
    refunds: msgspec.Raw = msgspec.Raw(b"")


class _CustomerId(msgspec.Struct, gc=False):
    id: Any = None


_LIGHT_ORDERS = msgspec.json.Decoder(list[LightOrder])
_CUSTOMER_IDS = msgspec.json.Decoder(list[_CustomerId | None])


def wire_hash(data: Any) -> str:
    """``wire_fingerprint``: SHA-256 of the bytes as sent, cut to 128 bits (as long as the
    canonical fingerprint); SHA-256 for the hardware that computes it."""
    return hashlib.sha256(data).digest()[:16].hex()


def vouched(order_id: Any, status: Any, initiated_at: Any, customer_id: Any) -> bool:
    """Whether what the light reading read is what ``parse_order`` would read without a word:
    only then is the rest of the order left for later."""
    return (
        type(order_id) is str
        and 3 < len(order_id) <= 64
        and order_id.startswith("or_")
        and type(status) is str
        and 0 < len(status) <= 64
        and type(initiated_at) is str
        and type(customer_id) is str
        and 3 < len(customer_id) <= 64
        and customer_id.startswith("cu_")
    )


# --- the orders of a page, read when needed -----------------------------------------------------


class PageOf:
    """Where a page's orders came from, for their messages, and whether any carries refunds."""

    __slots__ = ("carries_refunds", "count", "number", "resource")

    def __init__(self, number: int, resource: str, count: int, carries_refunds: bool) -> None:
        self.number = number
        self.resource = resource
        self.count = count
        self.carries_refunds = carries_refunds


#: What ``LazyOrder.read`` sets; read before, any of them reads the order.
DEFERRED_FIELDS = frozenset(
    (
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
    )
)
_CUSTOMER_FIELDS = ("guest", "name", "email_address", "phone_number")


class LazyCustomer(ParsedCustomer):
    """An order's customer, known by its id and the hash of its bytes; the rest is read from
    its order (or from its own bytes, if asked first) on first use."""

    __slots__ = ("_bytes",)

    def __init__(self, customer_id: str, data: msgspec.Raw) -> None:
        self.id = customer_id
        self.wire_fingerprint = wire_hash(data)
        self._bytes: msgspec.Raw | None = data
        self._raw = None
        self._json = None
        self._fingerprint = None
        self._plain = False

    def fill(self, parsed: ParsedCustomer) -> None:
        """Take the values of this customer as its order's parse read them."""
        if self._bytes is not None:
            for name in _CUSTOMER_FIELDS:
                setattr(self, name, getattr(parsed, name))
            self._raw, self._plain = parsed._raw, parsed._plain
            self._bytes = None

    def __getattr__(self, name: str) -> Any:
        if name in _CUSTOMER_FIELDS and self._bytes is not None:
            value, plain = decode_record(self._bytes)
            self.fill(parse_customer(value, plain=plain))
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _encode(self) -> None:
        if self._raw is None and self._json is None:
            self.guest  # noqa: B018  (reads the customer: sets _raw)
        super()._encode()


class LazyOrder(ParsedOrder):
    """An order of a walk's page, known at once by what the walk compares; the rest
    (``DEFERRED_FIELDS``) read by ``parse_order`` from its bytes on first use (``read``).

    ``__getattr__`` is only called for a slot not set yet, so a field once read costs nothing
    more. It holds no reference back to anything that holds it: a page's orders are freed by
    reference counting alone.
    """

    __slots__ = ("_bytes", "_index", "_page", "refunds_bytes")

    def __init__(
        self, light: LightOrder, customer: LazyCustomer, data: msgspec.Raw, page: PageOf, index: int
    ) -> None:
        self.id = light.id
        self.status = light.status
        self.customer = customer
        self.wire_fingerprint = wire_hash(data)
        #: The ``refunds`` it carries, as sent (empty when absent): ``carried_refunds``.
        self.refunds_bytes = light.refunds
        self._raw = None
        self._bytes: msgspec.Raw | None = data
        self._page = page
        self._index = index

    def __getattr__(self, name: str) -> Any:
        if name in DEFERRED_FIELDS and self._bytes is not None:
            self.read()
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def unread(self) -> bool:
        return self._bytes is not None

    def read(self) -> None:
        """Decode and parse the order (``parse_orders``); ``InvalidRecord`` if it is malformed."""
        if self._bytes is not None:
            value, plain = decode_record(self._bytes)
            (malformed,) = read_in_full([self], [value], plain)
            if malformed is not None:
                raise malformed

    def position(self) -> str:
        page = self._page
        return record_position(page.resource, page.number, self._index, page.count, {"id": self.id})


def read_orders(records: Sequence[Any], *, page_number: int, resource: str) -> LenientPage:
    """A page's orders: each kept as its bytes (``Page.records``) read light (``LazyOrder``),
    any other parsed at once (``read_records``); malformed ones set aside."""
    if not records or type(records[0]) is not msgspec.Raw:
        return read_records(records, parse_order, page_number=page_number, resource=resource)
    joined = b"[" + b",".join(records) + b"]"
    try:
        lights = _LIGHT_ORDERS.decode(joined)
    except (msgspec.DecodeError, ValueError):  # a record that is not an object, or not UTF-8
        return read_records(records, parse_order, page_number=page_number, resource=resource)
    customer_ids = _customer_ids(lights)
    # NUL and lone surrogates are made storable by decoding (``decode_record``): an order with
    # such an escape is parsed at once, its id as stored.
    unstorable = has_unstorable_escape(joined)
    page = PageOf(page_number, resource, len(records), any(light.refunds for light in lights))
    parsed: list[ParsedOrder] = []
    set_aside: list[tuple[str, InvalidRecord]] = []
    for index, (light, customer_id, data) in enumerate(
        zip(lights, customer_ids, records, strict=True), start=1
    ):
        if vouched(light.id, light.status, light.initiated_at, customer_id) and not (
            unstorable and has_unstorable_escape(data)
        ):
            customer = LazyCustomer(customer_id, light.customer)
            parsed.append(LazyOrder(light, customer, data, page, index))
            continue
        value = None
        try:
            value, plain = decode_record(data)
            order = parse_order(value, plain=plain)
        except InvalidRecord as exc:
            set_aside.append(
                (record_position(resource, page_number, index, len(records), value), exc)
            )
            continue
        order.wire_fingerprint = wire_hash(data)
        parsed.append(order)
    return LenientPage(parsed, set_aside)


def _customer_ids(lights: list[LightOrder]) -> list[Any]:
    """Each order's customer's ``id`` in one call for the page (``None`` where unknown: that
    order is parsed at once, and ``parse_order`` says what is wrong)."""
    customers = [light.customer or b"null" for light in lights]
    try:
        found = _CUSTOMER_IDS.decode(b"[" + b",".join(customers) + b"]")
    except (msgspec.DecodeError, ValueError):
        return [None] * len(lights)
    return [customer.id if customer is not None else None for customer in found]


def complete(
    records: list[Any], *, encode: bool = False
) -> tuple[list[Any], list[tuple[str, InvalidRecord]]]:
    """``records`` each read in full (``LazyOrder.read``), and the malformed ones, set aside
    with where they are: before a page is written, outside its transaction. ``encode``: each
    customer's canonical text too, once a page (the reading thread does it for the writer)."""
    kept: list[Any] = []
    set_aside: list[tuple[str, InvalidRecord]] = []
    encoded: set[str] = set()
    unread = [r for r in records if type(r) is LazyOrder and r.unread]
    failed = _read_together(unread)
    for record in records:
        exc = failed.get(record) if failed else None
        if exc is not None:
            set_aside.append((record.position(), exc))
            continue
        if encode and record.customer.id not in encoded:
            encoded.add(record.customer.id)
            record.customer.fingerprint  # noqa: B018  (computes and keeps raw_json too)
        kept.append(record)
    return kept, set_aside


def read_in_full(
    orders: Sequence[LazyOrder], values: Sequence[Any], plain: bool
) -> list[InvalidRecord | None]:
    """Each order read by ``parse_orders`` from its decoded ``value``, keeping the customer and
    the hashes of the bytes its light reading made; the ``InvalidRecord`` of each that is
    malformed (``None`` for the others)."""
    customers = [(order.customer, order.wire_fingerprint) for order in orders]
    results = parse_orders(values, plain=plain, into=orders)
    for order, (customer, wire_fingerprint), result in zip(orders, customers, results, strict=True):
        if isinstance(result, InvalidRecord):
            order.customer, order.wire_fingerprint = customer, wire_fingerprint
            continue
        customer.fill(order.customer)  # type: ignore[attr-defined]
        order.customer, order.wire_fingerprint = customer, wire_fingerprint
        order._bytes = None
    return [result if isinstance(result, InvalidRecord) else None for result in results]


def _read_together(orders: list[LazyOrder]) -> dict[LazyOrder, InvalidRecord]:
    """Read ``orders`` in full, decoded in one call for them all (one call costs less than one
    an order; if it fails, each alone); the malformed ones with their error."""
    if not orders:
        return {}
    joined = b"[" + b",".join(order._bytes for order in orders) + b"]"  # type: ignore[misc]
    try:
        values, plain = decode_answer(joined)
    except ValueError:
        failed: dict[LazyOrder, InvalidRecord] = {}
        for order in orders:
            try:
                order.read()
            except InvalidRecord as exc:
                failed[order] = exc
        return failed
    results = read_in_full(orders, values, plain)
    return {order: exc for order, exc in zip(orders, results, strict=True) if exc is not None}


def may_carry_refunds(orders: Sequence[Any]) -> bool:
    """False when none of the orders (of one page, as a walk read them) has a ``refunds`` key:
    the light reading told, so such a page costs nothing more. True for any other page."""
    first = orders[0] if orders else None
    return type(first) is not LazyOrder or first._page.carries_refunds


def carried_refunds(order: ParsedOrder) -> Any:
    """The ``refunds`` an order's record carries (``None`` when absent or null): a light order's
    from the bytes its reading kept (most have none: nothing to decode), any other from its
    decoded record. ``InvalidRecord`` for bytes that are not JSON."""
    if type(order) is LazyOrder:
        carried = order.refunds_bytes
        if not carried:
            return None
        try:
            return msgspec.json.decode(carried)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise InvalidRecord(f"order {order.id}: refunds are not JSON") from None
    return order.raw.get("refunds")
