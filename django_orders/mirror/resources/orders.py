"""The orders resource: pages read by wire fingerprint first (``order_pages``), orders
parsed by ``parse_orders``, stored with their customers into ``Order`` and ``Customer``
(``store.store_orders``) and the refunds they carry into ``Refund`` (``store_page``),
refreshed by lookup while open, and searched through ``/orders/search`` (the change feed
after each walk, and the backfill: ``searched``). Its walk shortcuts: docs/architecture/sync.md."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db import DataError

from ...client.lookups import lookup_orders
from ...client.pages import COLLECTIONS
from ...client.search_structs import SearchResult
from ...exceptions.wire import InvalidRecord
from ...models.mirror import TERMINAL_STATUSES, Customer, Order
from ..events import LOOKUP, PAGE, Origin
from ..parsing import LenientPage, ParsedOrder, parse_order
from ..refresh import stamp_refreshed, store_lookup, store_lookups
from ..refund_wire import embedded_refunds
from ..refunds import store_refunds
from ..result import Within
from ..searched import SearchedMirror
from ..store import MirrorResult, store_orders
from ..wire_match import count_matches
from .order_pages import SentOrder, complete, read_orders
from .registry import Resource


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
    """Orders: a page read by wire fingerprint first (``order_pages.read_orders``), stored with
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
