"""Refund records into the mirror: one write (``store_refunds``) for every answer with refunds.

Rows keyed by the remote id, the raw record kept whole; each real change (a refund first seen
included) is recorded on its order's timeline, which sends ``refund_status_changed`` once after
commit. Only forward: a record further back than the stored row never replaces it
(docs/architecture/checkout.md, "Refunds").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from ..client.refund_structs import RefundStruct, decode_refund, embedded_refunds
from ..db import app_database
from ..exceptions import InvalidRecord
from ..models import OrderRequest, Refund, RefundStatus
from . import events
from .events import LOOKUP, Origin
from .timestamps import parse_optional_timestamp, parse_timestamp

logger = logging.getLogger("django_orders.refunds")

#: Statuses a refund never leaves.
FINAL = frozenset({RefundStatus.SUCCEEDED, RefundStatus.FAILED, RefundStatus.CANCELED})
#: How far along its lifecycle a status is; an unknown status ranks between pending and final.
_RANK: dict[str, float] = {RefundStatus.PENDING: 0, RefundStatus.PROCESSING: 1}


def moves_forward(stored: str, incoming: str) -> bool:
    """True when a refund stored as ``stored`` may become ``incoming``."""
    if stored == incoming or stored in FINAL:
        return False
    if incoming == RefundStatus.CANCELED:
        return stored == RefundStatus.PENDING
    if incoming in FINAL:
        return True
    return _RANK.get(incoming, 0.5) > _RANK.get(stored, 0.5)


@dataclass
class StoredRefunds:
    """What one ``store_refunds`` wrote: the rows by id, and the status changes it announces."""

    refunds: dict[str, Refund] = field(default_factory=dict)
    changes: list[tuple[Refund, str | None]] = field(default_factory=list)


def refund_row(refund: RefundStruct, raw: Any, now: datetime) -> Refund:
    """The ``Refund`` row of one decoded record (``InvalidRecord`` for a bad timestamp)."""
    failure = refund.failure
    name = f"refund {refund.id}"
    try:
        return Refund(
            id=refund.id,
            order_id=refund.order_id,
            status=refund.status,
            total=refund.total.value,
            currency=refund.total.currency,
            reason=refund.reason or "",
            reference=refund.reference or "",
            failure_reason=(failure.reason or "") if failure else "",
            failure_detail=(failure.detail or "") if failure else "",
            failure_retryable=failure.retryable if failure else None,
            created_at=parse_timestamp(refund.created_at, field=f"{name} created_at"),
            processing_at=_optional(refund.processing_at, name, "processing_at"),
            succeeded_at=_optional(refund.succeeded_at, name, "succeeded_at"),
            failed_at=_optional(refund.failed_at, name, "failed_at"),
            canceled_at=_optional(refund.canceled_at, name, "canceled_at"),
            raw=raw,
            first_seen_at=now,
            changed_at=now,
        )
    except InvalidRecord:
        raise
    except (TypeError, ValueError) as exc:
        raise InvalidRecord(f"{name}: {exc}") from None


def _optional(value: str | None, name: str, what: str) -> datetime | None:
    return parse_optional_timestamp(value, field=f"{name} {what}")


_COPIED = [
    f.attname
    for f in Refund._meta.concrete_fields
    if f.attname not in ("id", "first_seen_at", "changed_at")
]


def store_refunds(
    records: Iterable[Any],
    *,
    now: datetime | None = None,
    settle: bool = True,
    origin: Origin = LOOKUP,
) -> StoredRefunds:
    """Upsert refund records (dicts as the service sent them) and announce their changes.

    Runs in the caller's transaction when there is one (an order lookup's write), else in its
    own; each change goes on the order's timeline with ``origin`` (who or what saw it), in one
    statement, and its signal out after that transaction commits. The rows are read with one
    query (locked, so two writers never both announce one change) and only rows that change
    are written. ``InvalidRecord`` for a record the app cannot use; nothing is written then.

    ``settle``: a refund request of this shop whose outcome was unknown (pending, or in
    review) and whose ``reference`` a record carries is recorded as succeeded with that
    refund: the refund exists upstream, so it must never be sent again.
    """
    now = now or timezone.now()
    rows: dict[str, Refund] = {}
    for raw in records:
        row = refund_row(decode_refund(raw), raw, now)
        rows[row.id] = row
    result = StoredRefunds()
    if not rows:
        return result
    using = app_database()
    with transaction.atomic(using=using):
        stored = Refund.objects.using(using).select_for_update().in_bulk(list(rows))
        new = [row for pk, row in rows.items() if pk not in stored]
        Refund.objects.using(using).bulk_create(new)
        for row in new:
            result.changes.append((row, None))
            result.refunds[row.id] = row
        for pk, current in stored.items():
            row = rows[pk]
            result.refunds[pk] = current
            previous = current.status
            if moves_forward(previous, row.status):
                result.changes.append((current, previous))
            elif not (row.status == previous and row.raw != current.raw):
                continue  # the same record, or one further back than the stored row
            for name in _COPIED:
                setattr(current, name, getattr(row, name))
            current.changed_at = now
            current.save(using=using, update_fields=[*_COPIED, "changed_at"])
        if settle:
            settle_requests(rows.values(), now, using)
        events.record(
            (
                events.refund_status_change(refund, previous, origin=origin, at=now)
                for refund, previous in result.changes
            ),
            using=using,
        )
    return result


_UNSETTLED = (OrderRequest.State.PENDING, OrderRequest.State.NEEDS_REVIEW)


def settle_requests(refunds: Iterable[Refund], now: datetime, using: str) -> int:
    """Record the unsettled refund requests these refunds answer (by reference and order)."""
    by_reference = {refund.reference: refund for refund in refunds if refund.reference}
    if not by_reference:
        return 0
    requests = OrderRequest.objects.using(using).filter(
        kind=OrderRequest.Kind.REFUND_CREATE, state__in=_UNSETTLED
    )
    settled = 0
    for pk, reference, order_id in requests.filter(reference__in=list(by_reference)).values_list(
        "pk", "reference", "order_id"
    ):
        refund = by_reference[str(reference)]
        if refund.order_id != order_id:
            continue
        settled += requests.filter(pk=pk).update(
            state=OrderRequest.State.SUCCEEDED,
            refund_id=refund.id,
            claimed_until=None,
            next_attempt_at=None,
            updated_at=now,
        )
        logger.info("Refund request %s settled by refund %s (its reference)", pk, refund.id)
    return settled


def store_embedded_refunds(
    order_id: str, order_record: Any, *, now: datetime | None = None, origin: Origin = LOOKUP
) -> StoredRefunds:
    """The ``refunds[]`` of one order record into the mirror (``InvalidRecord`` naming the
    order for a refund the app cannot use, or one of another order)."""
    records = embedded_refunds(order_record)
    for record in records:
        if isinstance(record, dict) and record.get("order_id") != order_id:
            refund_id = record.get("id")
            raise InvalidRecord(f"order {order_id} embeds refund {refund_id!r} of another order")
    try:
        return store_refunds(records, now=now, origin=origin)
    except InvalidRecord as exc:
        raise InvalidRecord(f"order {order_id}: {exc}") from None
