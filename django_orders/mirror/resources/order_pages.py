"""How the walk reads a page of orders: its wire schema (``LightOrder``) and its one decode path.

Each order is first read only as far as the walk compares it (``SentOrder``: id, status,
customer id, the hash of its bytes and of its customer's): a page the mirror holds byte for byte
is counted in one statement and never decoded. A page that changes anything is parsed by
``parse_orders``, the one decoder of orders (lookups and create answers too), once (``complete``).
Why: docs/architecture/sync.md, "Parsing".
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
    ParsedOrder,
    decode_record,
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
    """Whether what the first reading read is what ``parse_order`` would read without a word:
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


# --- a page's orders: as sent, then parsed once ------------------------------------------------


class SentOrder:
    """An order of a walk's page as it came: its bytes, and what the walk compares before it
    decodes anything (its id, status and customer's id, the hashes of its bytes and of its
    customer's). Not a parsed order, and never turned into one: a page that changes the mirror
    is parsed by ``complete`` into new ``ParsedOrder`` objects (``parse_orders``, the one
    decoder), a page that does not is counted from these alone (``orders.quiet_page``)."""

    __slots__ = (
        "customer_id",
        "customer_wire",
        "data",
        "id",
        "status",
        "where",
        "wire_fingerprint",
    )

    def __init__(
        self, light: LightOrder, customer_id: str, data: msgspec.Raw, where: tuple[Any, ...]
    ) -> None:
        self.id: str = light.id
        self.status: str = light.status
        self.customer_id = customer_id
        self.wire_fingerprint = wire_hash(data)
        self.customer_wire = wire_hash(light.customer)
        self.data = data
        #: (resource, page number, index, count): ``position``.
        self.where = where

    def position(self) -> str:
        """Where it is, for the message that sets it aside (``record_position``)."""
        resource, number, index, count = self.where
        return record_position(resource, number, index, count, {"id": self.id})

    def __repr__(self) -> str:
        return f"<SentOrder {self.id}>"


def read_orders(records: Sequence[Any], *, page_number: int, resource: str) -> LenientPage:
    """A page's orders: each kept as its bytes (``Page.records``) and read only as far as the
    walk compares it (``SentOrder``), any other parsed at once (``read_records``); malformed
    ones set aside."""
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
    count = len(records)
    parsed: list[Any] = []
    set_aside: list[tuple[str, InvalidRecord]] = []
    for index, (light, customer_id, data) in enumerate(
        zip(lights, customer_ids, records, strict=True), start=1
    ):
        if vouched(light.id, light.status, light.initiated_at, customer_id) and not (
            unstorable and has_unstorable_escape(data)
        ):
            parsed.append(
                SentOrder(light, customer_id, data, (resource, page_number, index, count))
            )
            continue
        value = None
        try:
            value, plain = decode_record(data)
            order = parse_order(value, plain=plain)
        except InvalidRecord as exc:
            set_aside.append((record_position(resource, page_number, index, count, value), exc))
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
) -> tuple[list[ParsedOrder], list[tuple[str, InvalidRecord]]]:
    """``records`` parsed (each ``SentOrder`` by ``parse_orders``, decoded in one call for them
    all; the others are parsed already), and the malformed ones, set aside with where they are:
    before a page is written, outside its transaction. ``encode``: each customer's canonical
    text too, once a page (the reading thread does it for the writer)."""
    sent = [record for record in records if type(record) is SentOrder]
    parsed = dict(zip(map(id, sent), _parse_sent(sent), strict=True))
    kept: list[ParsedOrder] = []
    set_aside: list[tuple[str, InvalidRecord]] = []
    encoded: set[str] = set()
    for record in records:
        order = parsed.get(id(record), record) if parsed else record
        if isinstance(order, InvalidRecord):
            set_aside.append((record.position(), order))
            continue
        if encode and order.customer.id not in encoded:
            encoded.add(order.customer.id)
            order.customer.fingerprint  # noqa: B018  (computes and keeps raw_json too)
        kept.append(order)
    return kept, set_aside


def _parse_sent(sent: list[SentOrder]) -> list[ParsedOrder | InvalidRecord]:
    """Each ``SentOrder`` parsed from its bytes, keeping the hashes of its bytes and of its
    customer's; decoded in one call for them all (one call costs less than one an order; if it
    fails, each alone, so that only the record that is not JSON is set aside)."""
    if not sent:
        return []
    try:
        values, plain = decode_answer(b"[" + b",".join(order.data for order in sent) + b"]")
        results = parse_orders(values, plain=plain)
    except ValueError:
        results = []
        for order in sent:
            try:
                value, one_plain = decode_record(order.data)
                results.append(parse_order(value, plain=one_plain))
            except InvalidRecord as exc:
                results.append(exc)
    for order, result in zip(sent, results, strict=True):
        if not isinstance(result, InvalidRecord):
            result.wire_fingerprint = order.wire_fingerprint
            result.customer.wire_fingerprint = order.customer_wire
    return results
