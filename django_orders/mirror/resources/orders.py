"""The orders resource: pages read by wire fingerprint first (``read_orders``), orders parsed by
``parse_orders``, stored with their customers into ``Order`` and ``Customer``
(``store.store_orders``) and the refunds they carry into ``Refund`` (``store_page``), refreshed
by lookup while open, and searched through ``/orders/search`` (the change feed after each walk,
and the backfill: ``SearchedMirror``). Its walk shortcuts: docs/architecture/sync.md.

How the walk reads a page of orders: its wire schema (``LightOrder``) and its one decode path.
Each order is first read only as far as the walk compares it (``SentOrder``: id, status,
customer id, the hash of its bytes and of its customer's): a page the mirror holds byte for byte
is counted in one statement and never decoded. A page that changes anything is parsed by
``parse_orders``, the one decoder of orders (lookups and create answers too), once
(``complete``). Why: docs/architecture/sync.md, "Parsing".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import msgspec
from django.db import DataError

from ...client.lookups import lookup_orders
from ...client.pages import COLLECTIONS
from ...client.search import SearchResult
from ...exceptions.wire import InvalidRecord
from ...models.mirror import TERMINAL_STATUSES, Customer, Order
from ...wire_json import decode_answer, has_unstorable_escape
from ..events import LOOKUP, PAGE, Origin
from ..parsing import (
    LenientPage,
    ParsedOrder,
    decode_record,
    parse_order,
    parse_orders,
    read_records,
    record_position,
)
from ..refresh import stamp_refreshed, store_lookup, store_lookups
from ..refunds import embedded_refunds, store_refunds
from ..result import Within
from ..store import MirrorResult, store_orders
from ..wire_match import count_matches
from .registry import Resource, SearchedMirror

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


class RefundsNotStorable(DataError):
    """An order of a page whose ``refunds[]`` the mirror cannot store (malformed, or a refund
    of another order): the page is written again record by record and that order set aside
    with this reason, as a record the database refuses."""


def store_page(
    orders: Sequence[ParsedOrder],
    *,
    now: datetime,
    sent_at: datetime | None = None,
    known_customers: set[str] | None = None,
) -> MirrorResult:
    """``store_orders``, then the refunds the page's orders carry, in the same transaction
    and by the refunds' own rule (only forward, one signal per real change)."""
    result = store_orders(orders, now=now, sent_at=sent_at, known_customers=known_customers)
    try:
        records = page_refunds(orders)
        if records:
            # Read from the service with the page: the refresh of open refunds skips them.
            store_refunds(records, now=now, confirmed=True, origin=PAGE)
    except InvalidRecord as exc:
        raise RefundsNotStorable(str(exc)) from None
    return result


def page_refunds(orders: Sequence[ParsedOrder]) -> list[Any]:
    """The refund records the ``orders`` (of one page) carry, each checked to be of its order."""
    records: list[Any] = []
    for order in orders:
        refunds = order.raw.get("refunds")
        if not refunds:
            continue
        for record in embedded_refunds({"refunds": refunds}):
            if not isinstance(record, dict) or record.get("order_id") != order.id:
                refund_id = record.get("id") if isinstance(record, dict) else None
                raise InvalidRecord(
                    f"order {order.id} embeds refund {refund_id!r} of another order"
                )
            records.append(record)
    return records


def quiet_page(records: list[Any], known_customers: set[str]) -> MirrorResult | None:
    """The page counted without writing when the mirror holds each of its orders and customers
    as the bytes they came in: one statement, nothing decoded (``SentOrder``; orders parsed
    already, by the reading thread, are compared by the same hashes). ``None`` when it must be
    written: parsed, then compared by fingerprint in its transaction, which also records the
    new bytes of an order sent in other bytes but unchanged (``store.store_new_bytes``)."""
    orders: dict[str, tuple[str, str, str]] = {}
    for record in records:
        if type(record) is SentOrder:
            keys = (record.wire_fingerprint, record.customer_id, record.customer_wire)
        else:
            keys = (record.wire_fingerprint, record.customer.id, record.customer.wire_fingerprint)
        if not keys[0] or not keys[2]:
            return None  # decoded by the client (``Page.records``): no bytes to compare
        orders.setdefault(record.id, keys)
    customers: dict[str, str] = {}
    for _wire, customer_id, customer_wire in orders.values():
        if customer_id not in known_customers:
            customers.setdefault(customer_id, customer_wire)
    order_count, customer_count = count_matches(
        (Order, [(pk, keys[0]) for pk, keys in orders.items()]),
        (Customer, list(customers.items())),
    )
    if order_count != len(orders) or customer_count != len(customers):
        return None
    known_customers.update(customers)
    return MirrorResult(unchanged=len(orders))


def customers(records: Sequence[ParsedOrder]) -> set[str]:
    return {record.customer.id for record in records}


def same_order(result: SearchResult, held: tuple[Any, ...]) -> bool:
    """Whether the mirror's status and amount are the projection's."""
    status, total, currency = held
    if result.status != status:
        return False
    amount = result.amount
    return amount is None or (amount.value == total and amount.currency == currency)


def is_open(record: ParsedOrder | SentOrder) -> bool:
    return record.status not in TERMINAL_STATUSES


class OrdersResource(Resource):
    """Orders: a page read by wire fingerprint first (``read_orders``), stored with
    its customers and the refunds it carries (``store_page``), open orders refreshed by lookup,
    searched through ``/orders/search`` (the change feed after each walk, and the backfill)."""

    name = "orders"
    collection = COLLECTIONS["orders"]
    model = Order
    noun = ("order", "orders")
    refresh_refunds = True
    refreshed = True
    search_type = "order"
    searched = SearchedMirror(
        model=Order,
        key="id",
        same=same_order,
        compared=("status", "total", "currency"),
    )
    change_feed = True

    def parse(self, record: Any, *, plain: bool = False) -> ParsedOrder:
        return parse_order(record, plain=plain)

    def store(
        self,
        records: Sequence[Any],
        *,
        now: datetime,
        sent_at: datetime | None = None,
        known_customers: set[str] | None = None,
    ) -> MirrorResult:
        return store_page(records, now=now, sent_at=sent_at, known_customers=known_customers)

    def read_page(self, records: Sequence[Any], *, page_number: int) -> LenientPage:
        return read_orders(records, page_number=page_number, resource=self.name)

    def complete(
        self, records: list[Any], *, encode: bool = False
    ) -> tuple[list[Any], list[tuple[str, InvalidRecord]]]:
        return complete(records, encode=encode)

    def quiet(self, records: list[Any], known_customers: set[str]) -> MirrorResult | None:
        return quiet_page(records, known_customers)

    def is_open(self, record: Any) -> bool:
        return is_open(record)

    def customers(self, records: Sequence[Any]) -> set[str]:
        return customers(records)

    has_lookups = True
    batched_lookups = True

    def look_up(
        self,
        ids: Iterable[str],
        *,
        concurrency: int | None = None,
        heartbeat: Callable[[], None] | None = None,
        gate: Any = None,
    ) -> Iterator[Any]:
        return lookup_orders(ids, concurrency=concurrency, heartbeat=heartbeat, gate=gate)

    def store_lookup(
        self, lookup: Any, *, within: Within | None = None, origin: Origin | None = None
    ) -> MirrorResult | None:
        return store_lookup(lookup, within=within, origin=origin or LOOKUP)

    def store_lookups(
        self, lookups: Sequence[Any], *, within: Within | None = None, origin: Origin | None = None
    ) -> MirrorResult:
        return store_lookups(lookups, within=within, origin=origin or LOOKUP)

    def set_aside(self, record_id: str, *, within: Within | None = None) -> None:
        stamp_refreshed(record_id, within=within)


ORDERS = OrdersResource()
