"""One looked-up order into the mirror, in its own short transaction; or several at once.

Shared by the sync's refresh of orders outside the page window and by checkout's
``confirm_order``/``cancel_order``: the same parse, the same write, the same signals after
commit; the payment transaction an order embeds is stored with it. ``within`` lets a caller
add its own bookkeeping (a sync run's counts, the lease) to that transaction, so it commits or
rolls back with the order. ``store_lookups`` writes a batch of lookups (the backfill's) the same
way, in one transaction and a fixed number of statements.

``order_first_seen`` for shop code (``announce``) is sent after the write that caused it has
committed, by every writer of orders. ``order_status_changed`` is sent from the timeline's
entries instead (``events.announce``): one entry, one signal, whatever path saw the change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from django.utils import timezone

from ..client.reading import Lookup
from ..db import app_atomic, app_on_commit
from ..exceptions.wire import InvalidRecord
from ..models.mirror import Order
from ..signals import order_first_seen
from .events import LOOKUP, Origin
from .money_records import decode_balance_transaction
from .money_store import ParsedMoney, store_transactions
from .parsed import canonical_bytes, hash_text
from .parsing import ParsedOrder, parse_order
from .refunds import store_embedded_refunds
from .result import MirrorResult, Within
from .store import store_orders


class Written(Protocol):
    """What ``announce`` reads of a write's result (``store.MirrorResult``), only when a
    receiver listens: the orders it saw for the first time."""

    @property
    def first_seen(self) -> list[Order]: ...


def announce(result: Written) -> None:
    """Sent after commit, so a receiver never sees a row that a rollback would take back.

    ``send_robust``: one failing receiver neither stops the others nor the sync.
    """
    responses = []
    if order_first_seen.has_listeners(Order):
        for order in result.first_seen:
            responses += order_first_seen.send_robust(sender=Order, order=order)
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error("Signal receiver %r failed: %r", receiver, response)


logger = logging.getLogger("django_orders.sync")


def store_lookup(
    lookup: Lookup, *, within: Within | None = None, origin: Origin = LOOKUP
) -> MirrorResult | None:
    """Write one lookup's order in its own short transaction; ``None`` for an unknown order.
    ``origin``: what its timeline entries say looked it up (``store_answer``)."""
    if lookup.record is None:
        logger.info("Order %s is unknown to the service (404); left as it is", lookup.order_id)
        stamp_refreshed(lookup.order_id, within=within)
        return None
    return store_answer(
        lookup.order_id,
        lookup.record,
        what="lookup",
        sent_at=lookup.sent_at,
        within=within,
        origin=origin,
    )


def store_answer(
    order_id: str,
    record: Any,
    *,
    what: str,
    sent_at: datetime | None = None,
    within: Within | None = None,
    origin: Origin = LOOKUP,
) -> MirrorResult:
    """Write the order the service answered about ``order_id`` (a lookup's, a cancel's).

    ``sent_at``: when the request was sent; the mirror keeps an order it holds from a later
    request, or further along its lifecycle (``lifecycle``). ``InvalidRecord`` names ``what``
    answered and the field, or that the answer was about another order; nothing is written
    then. The changes it writes go on the timeline with ``origin`` (``events.Origin``).
    """
    parsed = _parse(order_id, record, what)
    now = timezone.now()
    with app_atomic():
        result = store_orders([parsed], now=now, sent_at=sent_at, refreshed=True, origin=origin)
        # The refunds the order embeds: their rows, signals and the requests they settle.
        store_embedded_refunds(order_id, record, now=now, origin=origin)
        store_embedded_transaction(order_id, record, now=now)
        if within is not None:
            within(result, now)
        app_on_commit(partial(announce, result))
    return result


def _parse(order_id: str, record: Any, what: str) -> ParsedOrder:
    try:
        parsed = parse_order(record)
    except InvalidRecord as exc:
        raise InvalidRecord(f"{what} of order {order_id}: {exc}") from None
    if parsed.id != order_id:
        raise InvalidRecord(f"{what} of order {order_id} answered with order {parsed.id}")
    return parsed


def store_lookups(
    lookups: Sequence[Lookup], *, within: Within | None = None, origin: Origin = LOOKUP
) -> MirrorResult:
    """Write several lookups' orders (each id once) in one short transaction: what
    ``store_lookup`` does for each, with one ``store_orders`` for all of them (each order
    weighed against its own request's ``sent_at``), the refunds they embed, and the orders the
    service does not know stamped. ``within`` runs once, with the batch's result.
    ``InvalidRecord`` for any answer the app cannot use: nothing is written then."""
    found = [lookup for lookup in lookups if lookup.record is not None]
    parsed = [_parse(lookup.order_id, lookup.record, "lookup") for lookup in found]
    unknown = [lookup.order_id for lookup in lookups if lookup.record is None]
    for order_id in unknown:
        logger.info("Order %s is unknown to the service (404); left as it is", order_id)
    now = timezone.now()
    sent_at = {lookup.order_id: lookup.sent_at or now for lookup in found}
    with app_atomic():
        result = store_orders(parsed, now=now, sent_at=sent_at, refreshed=True, origin=origin)
        for lookup in found:
            store_embedded_refunds(lookup.order_id, lookup.record, now=now, origin=origin)
        # The batch's payment transactions in one write, whatever its size.
        embedded = (embedded_transaction(lookup.order_id, lookup.record) for lookup in found)
        store_transactions([parsed for parsed in embedded if parsed is not None], now=now)
        if unknown:
            Order.objects.filter(pk__in=unknown).update(refreshed_at=now)
        if within is not None:
            within(result, now)
        app_on_commit(partial(announce, result))
    return result


def stamp_refreshed(order_id: str, *, within: Within | None = None) -> None:
    """Mark an order refreshed without a new record: it goes to the back of the refresh queue
    instead of blocking it (an unknown order, or one the database refused)."""
    now = timezone.now()
    with app_atomic():
        Order.objects.filter(pk=order_id).update(refreshed_at=now)
        if within is not None:
            within(None, now)


def store_embedded_transaction(order_id: str, record: Any, *, now: datetime) -> None:
    """The payment transaction an order's answer embeds, stored in the caller's transaction
    (``embedded_transaction``)."""
    parsed = embedded_transaction(order_id, record)
    if parsed is not None:
        store_transactions([parsed], now=now)


def embedded_transaction(order_id: str, record: Any) -> ParsedMoney | None:
    """The payment transaction an order's answer embeds (``payment.balance_transaction``),
    decoded; ``None`` without one. One that does not decode is logged and left out (the
    transactions sync reads it again), never a reason to refuse the order."""
    payment = record.get("payment") if isinstance(record, dict) else None
    embedded = payment.get("balance_transaction") if isinstance(payment, dict) else None
    if not isinstance(embedded, dict):
        return None
    try:
        transaction_id, fields = decode_balance_transaction(embedded)
    except InvalidRecord as exc:
        logger.warning("Order %s: its payment transaction was left out: %s", order_id, exc)
        return None
    return ParsedMoney(transaction_id, fields, [], hash_text(canonical_bytes(embedded)))
