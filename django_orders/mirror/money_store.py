"""Writing payouts, balance transactions and balance snapshots into the typed mirror, and
what the mirror's money records name that it lacks (what the sync looks up next).

A record is decoded by the one decode path of these resources (``money_records``); a record
whose canonical text hashes to the stored ``fingerprint`` is not written again (one read and
one ``INSERT ... ON CONFLICT`` a page; a payout's items replaced with it). An order's answer
embeds its payment transaction (``payment.balance_transaction``): ``mirror.refresh`` stores
it with the order. Records come here decoded (``resources.money`` decodes them): this module
imports no decoder and no client, so the order writers that use it stay shallow.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from ..db import app_atomic, app_database
from ..exceptions.wire import InvalidRecord
from ..models import BalanceSnapshot, BalanceTransaction, Order, Payout, PayoutItem, Refund
from .events import Origin
from .result import MirrorResult, Within

logger = logging.getLogger("django_orders.sync")

__all__ = [
    "ParsedMoney",
    "missing_count",
    "missing_ids",
    "set_aside_money",
    "store_balance_snapshot",
    "store_money_lookup",
    "store_payouts",
    "store_transactions",
]


class ParsedMoney:
    """A payout or balance transaction as decoded: its id, its row's fields, its items (a
    payout's), and the fingerprint of its canonical text."""

    __slots__ = ("fields", "fingerprint", "id", "items")

    def __init__(
        self, id: str, fields: dict[str, Any], items: list[dict[str, Any]], fingerprint: str
    ) -> None:
        self.id = id
        self.fields = fields
        self.items = items
        self.fingerprint = fingerprint

    def __repr__(self) -> str:
        return f"<ParsedMoney {self.id}>"


def _write(
    model: Any, records: Sequence[ParsedMoney], now: datetime
) -> tuple[MirrorResult, list[ParsedMoney]]:
    """Upsert the records whose fingerprint differs from the stored one: one read, one write
    (``INSERT ... ON CONFLICT``); returns the counts and the records written."""
    result = MirrorResult()
    unique: dict[str, ParsedMoney] = {}
    for record in records:
        unique.setdefault(record.id, record)
    if not unique:
        return result, []
    database = app_database()
    stored = dict(
        model._default_manager.using(database)
        .filter(pk__in=list(unique))
        .values_list("pk", "fingerprint")
    )
    written = []
    for record in unique.values():
        previous = stored.get(record.id)
        if previous == record.fingerprint:
            result.unchanged += 1
            continue
        if previous is None:
            result.created += 1
        else:
            result.updated += 1
        written.append(record)
    if written:
        names = list(written[0].fields)
        model._default_manager.using(database).bulk_create(
            [
                model(
                    pk=record.id,
                    fingerprint=record.fingerprint,
                    first_seen_at=now,
                    changed_at=now,
                    **record.fields,
                )
                for record in written
            ],
            update_conflicts=True,
            unique_fields=["id"],
            update_fields=[*names, "fingerprint", "changed_at"],
        )
    return result, written


def store_transactions(records: Sequence[ParsedMoney], *, now: datetime) -> MirrorResult:
    """A page of balance transactions, in the caller's transaction."""
    return _write(BalanceTransaction, records, now)[0]


def store_payouts(records: Sequence[ParsedMoney], *, now: datetime) -> MirrorResult:
    """A page of payouts and, for each written one, its items replaced: in the caller's
    transaction, four statements at most whatever the page."""
    result, written = _write(Payout, records, now)
    if written:
        database = app_database()
        PayoutItem.objects.using(database).filter(payout_id__in=[r.id for r in written]).delete()
        PayoutItem.objects.using(database).bulk_create(
            [
                PayoutItem(
                    payout_id=record.id,
                    transaction_id=item["transaction_id"],
                    amount=item["amount"],
                    allocated_amount=item["allocated_amount"],
                    currency=item["currency"],
                    position=item["position"],
                )
                for record in written
                for item in record.items
            ]
        )
    return result


def store_money_lookup(
    resource: str,
    parse: Any,
    store: Any,
    lookup: Any,
    *,
    within: Within | None = None,
    origin: Origin | None = None,
) -> MirrorResult | None:
    """One looked-up payout or transaction, in its own transaction (``within`` inside it);
    ``None`` for a record the service does not know."""
    if lookup.record is None:
        set_aside_money(lookup.record_id, within=within)
        return None
    try:
        parsed = parse(lookup.record)
    except InvalidRecord as exc:
        raise InvalidRecord(f"/{resource}/lookup of {lookup.record_id}: {exc}") from None
    if parsed.id != lookup.record_id:
        raise InvalidRecord(
            f"/{resource}/lookup of {lookup.record_id} answered with record {parsed.id}"
        )
    now = timezone.now()
    with app_atomic():
        result: MirrorResult = store([parsed], now=now)
        if within is not None:
            within(result, now)
    return result


def set_aside_money(record_id: str, *, within: Within | None = None) -> None:
    """A lookup that stores nothing: only the caller's bookkeeping."""
    with app_atomic():
        if within is not None:
            within(None, timezone.now())


def store_balance_snapshot(rows: list[dict[str, Any]], *, now: datetime | None = None) -> int:
    """A ``/balances`` answer's rows (``money_records.decode_balance_snapshot``) stored, one
    ``BalanceSnapshot`` per currency, taken ``now``; returns how many."""
    now = now or timezone.now()
    with app_atomic():
        BalanceSnapshot.objects.using(app_database()).bulk_create(
            [BalanceSnapshot(taken_at=now, **row) for row in rows]
        )
    return len(rows)


def _named(kind: str) -> Any:
    """The ids the mirror's money records name that it lacks (with repeats), oldest first:
    ``transactions`` that payout items name, ``orders`` and ``refunds`` that transactions name."""
    database = app_database()
    if kind == "transactions":
        held = BalanceTransaction.objects.using(database).filter(pk=OuterRef("transaction_id"))
        return (
            PayoutItem.objects.using(database)
            .filter(~Exists(held))
            .order_by("payout__initiated_at", "payout_id", "position")
            .values_list("transaction_id", flat=True)
        )
    column = {"orders": "order_id", "refunds": "refund_id"}[kind]
    model = Order if kind == "orders" else Refund
    present = model._default_manager.using(database).filter(pk=OuterRef(column))
    return (
        BalanceTransaction.objects.using(database)
        .filter(**{f"{column}__isnull": False})
        .filter(~Exists(present))
        .order_by("created_at", "id")
        .values_list(column, flat=True)
    )


def missing_ids(kind: str, limit: int) -> list[str]:
    """At most ``limit`` ids of ``kind`` the mirror lacks and knows of (``_named``)."""
    ids: dict[str, None] = {}
    if limit <= 0:
        return []
    for record_id in _named(kind).iterator(chunk_size=500):
        ids[record_id] = None
        if len(ids) >= limit:
            break
    return list(ids)


def missing_count(kind: str) -> int:
    """How many ids of ``kind`` the mirror lacks and knows of (one query)."""
    return int(_named(kind).order_by().distinct().count())
