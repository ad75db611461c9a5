"""The orders resource: pages read light (``order_pages``), orders parsed by ``parse_order``,
stored with their customers into ``Order`` and ``Customer`` (``store.store_orders``) and the
refunds they carry into ``Refund`` (``store_page``), refreshed by lookup while open, and
searched through ``/orders/search`` (the change feed after each walk, and the backfill:
``searched``). Its walk shortcuts are in docs/architecture/sync.md."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import DataError

from ...client.lookups import lookup_orders
from ...client.pages import COLLECTIONS
from ...client.search_structs import SearchResult
from ...exceptions.wire import InvalidRecord
from ...models.mirror import TERMINAL_STATUSES, Order
from ..comparison import compare_orders, read_stored
from ..events import PAGE
from ..parsing import ParsedOrder, parse_order
from ..refresh import stamp_refreshed, store_lookup, store_lookups
from ..refund_wire import embedded_refunds
from ..refunds import store_refunds
from ..searched import SearchedMirror
from ..store import MirrorResult, store_new_bytes, store_orders, stored_as_sent
from . import order_transfer
from .order_pages import carried_refunds, complete, may_carry_refunds, read_orders
from .order_transfer import rebuilt
from .registry import ReadApart, Resource


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
    if not may_carry_refunds(orders):
        return records
    for order in orders:
        refunds = carried_refunds(order)
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


def quiet_page(records: list[ParsedOrder], known_customers: set[str]) -> MirrorResult | None:
    """The page counted without writing when it changes nothing in the mirror; ``None`` when
    it must be written. The bytes decide in one statement; fingerprints only if they differ
    (reading those orders: one that turns out malformed is set aside when the page is written)."""
    comparison = compare_orders(records, known_customers=known_customers, read=False)
    if not stored_as_sent(comparison):
        try:
            read_stored(comparison)
            if not comparison.unchanged:
                return None  # written in its transaction, which reads the fingerprints again
        except InvalidRecord:
            return None
        store_new_bytes(comparison)  # so that the next re-sync needs the one statement again
    known_customers.update(comparison.customers)
    return MirrorResult(unchanged=len(comparison.orders))


def customers(records: Sequence[ParsedOrder]) -> set[str]:
    return {record.customer.id for record in records}


def same_order(result: SearchResult, held: tuple[Any, ...]) -> bool:
    """Whether the mirror's status and amount are the projection's."""
    status, total, currency = held
    if result.status != status:
        return False
    amount = result.amount
    return amount is None or (amount.value == total and amount.currency == currency)


def is_open(record: ParsedOrder) -> bool:
    return record.status not in TERMINAL_STATUSES


ORDERS = Resource(
    name="orders",
    collection=COLLECTIONS["orders"],
    model=Order,
    parse=parse_order,
    store=store_page,
    reader=read_orders,
    complete=complete,
    read_apart=ReadApart(reader=f"{order_transfer.__name__}:read_shipped", rebuild=rebuilt),
    quiet=quiet_page,
    is_open=is_open,
    refresh_refunds=True,
    customers=customers,
    noun=("order", "orders"),
    search_type="order",
    searched=SearchedMirror(
        model=Order,
        key="id",
        same=same_order,
        compared=("status", "total", "currency"),
    ),
    look_up=lookup_orders,
    store_lookup=store_lookup,
    store_lookups=store_lookups,
    set_aside=stamp_refreshed,
    change_feed=True,
)
