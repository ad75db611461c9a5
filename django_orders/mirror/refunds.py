"""Refund records into the mirror: one write (``store_refunds``) for every answer with refunds,
and the one reading of the refund record on the wire (``inttegro.refund.Refund``, as typed
msgspec structs).

The reading serves every answer that carries refunds (create, cancel, lookup, an order's
``refunds[]``). Unknown fields are allowed and a status is any string (the provider adds them);
what is missing or of the wrong type is an ``InvalidRecord`` naming the refund and the field.

The write: rows keyed by the remote id, the raw record kept whole; each real change (a refund
first seen included) is recorded on its order's timeline, which sends ``refund_status_changed``
once after commit. Answers, the pages of ``/refunds/page``, the ``refunds[]`` of orders' pages
and the refresh of refunds still moving all go through it. Only forward: a record further back
than the stored row never replaces it (docs/architecture/checkout.md, "Refunds").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec
from django.db import IntegrityError, transaction
from django.utils import timezone
from msgspec import Struct

from ..client.reading import RefundLookup
from ..db import app_database
from ..exceptions.flows import RefundAnswerMismatch
from ..exceptions.wire import InvalidRecord, error_name
from ..models.journal import OrderRequest
from ..models.mirror import Order, Refund, RefundStatus
from . import events
from .events import LOOKUP, Origin
from .parsing import parse_optional_timestamp, parse_timestamp

__all__ = [
    "RefundFailure",
    "RefundMoney",
    "RefundStruct",
    "decode_refund",
    "embedded_refunds",
    "refund_mismatch",
]


class RefundMoney(Struct, frozen=True):
    currency: str
    value: int


class RefundFailure(Struct, frozen=True):
    """Why a refund failed, as the provider says: one of its reasons, a merchant-facing detail
    and whether the same refund may succeed if tried again (with a new reference)."""

    reason: str | None = None
    detail: str | None = None
    retryable: bool | None = None


class RefundStruct(Struct, frozen=True):
    id: str
    order_id: str
    status: str
    total: RefundMoney
    created_at: str
    reason: str | None = None
    reason_details: str | None = None
    reference: str | None = None
    failure: RefundFailure | None = None
    processing_at: str | None = None
    succeeded_at: str | None = None
    failed_at: str | None = None
    canceled_at: str | None = None


def decode_refund(record: Any) -> RefundStruct:
    """One refund record (a dict as decoded from JSON) as a ``RefundStruct``."""
    try:
        refund = msgspec.convert(record, RefundStruct)
    except msgspec.ValidationError as exc:
        name = record.get("id") if isinstance(record, dict) else None
        raise InvalidRecord(f"refund {name or '(no id)'}: {exc}") from None
    if not refund.id.startswith("rf_"):
        raise InvalidRecord(f"refund id {refund.id!r} does not start with 'rf_'")
    return refund


def embedded_refunds(order_record: Any) -> list[Any]:
    """The ``refunds[]`` an order record embeds (none when absent or null)."""
    refunds = order_record.get("refunds") if isinstance(order_record, dict) else None
    if refunds is None:
        return []
    if not isinstance(refunds, list):
        raise InvalidRecord("order refunds must be an array")
    return refunds


def _wire_lines(lines: Any) -> list[tuple[str, str, int]] | None:
    """``(line id, currency, amount)`` of a refund's ``line_items``, sorted; ``None`` when they
    cannot be read (an answer breaking the contract disagrees with any request)."""
    if not isinstance(lines, list):
        return None
    read = []
    for line in lines:
        money = line.get("refund_amount") if isinstance(line, dict) else None
        if not isinstance(money, dict):
            return None
        line_id, currency, value = (
            line.get("order_line_item_id"),
            money.get("currency"),
            money.get("value"),
        )
        if not (isinstance(line_id, str) and isinstance(currency, str)):
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        read.append((line_id, currency, value))
    return sorted(read)


def _shown_lines(lines: list[tuple[str, str, int]] | None) -> str:
    if lines is None:
        return "unreadable"
    text = ", ".join(f"{line_id} {value} {currency}" for line_id, currency, value in lines)
    return text if len(text) <= 300 else text[:300] + "..."


def refund_mismatch(payload: str, record: Any) -> str | None:
    """Why the refund ``record`` is not the refund the stored create ``payload`` asked for (its
    order, reference, lines and amounts, total), or ``None``. Whether its id is already linked
    to another request is the caller's to ask (it needs the journal). ``InvalidRecord`` for a
    record that is no refund at all."""
    sent = json.loads(payload)
    refund = decode_refund(record)
    problems = []
    if refund.order_id != sent["order_id"]:
        problems.append(f"it is a refund of order {refund.order_id}, not of {sent['order_id']}")
    if refund.reference != sent["reference"]:
        shown = repr(refund.reference)
        shown = shown if len(shown) <= 100 else shown[:100] + "..."
        problems.append(f"its reference is {shown}, not {sent['reference']!r}")
    sent_lines = _wire_lines(sent["line_items"])
    answered = _wire_lines(record.get("line_items"))
    if answered != sent_lines:
        problems.append(
            f"its lines are {_shown_lines(answered)}, not the {_shown_lines(sent_lines)} sent"
        )
    elif sent_lines:
        currency, total = sent_lines[0][1], sum(line[2] for line in sent_lines)
        if (refund.total.currency, refund.total.value) != (currency, total):
            problems.append(
                f"its total is {refund.total.value} {refund.total.currency}, the lines sent add "
                f"up to {total} {currency}"
            )
    if not problems:
        return None
    return f"The service answered with refund {refund.id}, which is not the refund sent: " + (
        "; ".join(problems) + "."
    )


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


class OrderNotMirrored(IntegrityError):
    """A refund of an order the mirror does not hold (its foreign key would fail): a page
    walk sets that refund aside with this reason; the order's next sync brings it along."""

    def __init__(self, refund_id: str, order_id: str) -> None:
        super().__init__(
            f"refund {refund_id}: its order {order_id} is not in the mirror yet; syncing the "
            "orders (or looking the order up) mirrors the refunds it carries"
        )
        self.refund_id = refund_id
        self.order_id = order_id


class RefundOrderChanged(IntegrityError):
    """A record that puts a stored refund on another order: a refund never changes its order
    (its amounts count against that order's lines, its timeline is that order's), so nothing
    of the record is written; a page walk or a refresh sets that refund aside with this
    reason, and the stored refund stays as it was."""

    def __init__(self, refund_id: str, stored_order_id: str, order_id: str) -> None:
        super().__init__(
            f"refund {refund_id} is a refund of order {stored_order_id}; the answer says order "
            f"{order_id}, and a refund never changes its order: left as stored"
        )
        self.refund_id = refund_id
        self.stored_order_id = stored_order_id
        self.order_id = order_id


@dataclass
class StoredRefunds:
    """What one ``store_refunds`` wrote: the rows by id, the status changes it announces, and
    how many records were new, changed or the same as stored (a record further back than the
    stored row counts as unchanged: nothing of it was written)."""

    refunds: dict[str, Refund] = field(default_factory=dict)
    changes: list[tuple[Refund, str | None]] = field(default_factory=list)
    created: int = 0
    updated: int = 0
    unchanged: int = 0


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
    if f.attname not in ("id", "first_seen_at", "changed_at", "refreshed_at")
]


def store_refunds(
    records: Iterable[Any],
    *,
    now: datetime | None = None,
    settle: bool = True,
    origin: Origin = LOOKUP,
    confirmed: bool = False,
    check_orders: bool = False,
) -> StoredRefunds:
    """Upsert refund records (dicts as the service sent them) and announce their changes.

    Runs in the caller's transaction when there is one (an order lookup's write), else in its
    own; each change goes on the order's timeline with ``origin`` (who or what saw it), in one
    statement, and its signal out after that transaction commits. The rows are read with one
    query (locked, so two writers never both announce one change) and only rows that change
    are written. ``InvalidRecord`` for a record the app cannot use, ``RefundOrderChanged`` for
    one that names another order than the stored refund's; nothing is written then.

    ``settle``: a refund request of this shop whose outcome was unknown (pending, or in
    review) and whose ``reference`` a record carries is recorded as succeeded with that
    refund: the refund exists upstream, so it must never be sent again.

    ``confirmed``: the records were just read from the service (a refund lookup, a page):
    every row is stamped ``refreshed_at``, so the sync's refresh of refunds still moving takes
    the others first. ``check_orders`` (records that come without their order: a page of
    refunds): a new refund of an order the mirror does not hold raises ``OrderNotMirrored``
    before anything is written, rather than a foreign key error at commit.
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
        for pk, current in stored.items():
            if rows[pk].order_id != current.order_id:
                raise RefundOrderChanged(pk, current.order_id, rows[pk].order_id)
        new = [row for pk, row in rows.items() if pk not in stored]
        if new and check_orders:
            _require_orders(new, using)
        for row in new:
            row.refreshed_at = now if confirmed else None
        Refund.objects.using(using).bulk_create(new)
        result.created = len(new)
        for row in new:
            result.changes.append((row, None))
            result.refunds[row.id] = row
        fields = [*_COPIED, "changed_at", "refreshed_at"] if confirmed else [*_COPIED, "changed_at"]
        unchanged: list[str] = []
        for pk, current in stored.items():
            row = rows[pk]
            result.refunds[pk] = current
            previous = current.status
            if moves_forward(previous, row.status):
                result.changes.append((current, previous))
            elif not (row.status == previous and row.raw != current.raw):
                # The same record, or one further back than the stored row.
                result.unchanged += 1
                unchanged.append(pk)
                continue
            result.updated += 1
            for name in _COPIED:
                setattr(current, name, getattr(row, name))
            current.changed_at = now
            if confirmed:
                current.refreshed_at = now
            current.save(using=using, update_fields=fields)
        if confirmed and unchanged:
            Refund.objects.using(using).filter(pk__in=unchanged).update(refreshed_at=now)
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


def _require_orders(new: list[Refund], using: str) -> None:
    """``OrderNotMirrored`` for the first new refund whose order the mirror lacks (one query)."""
    wanted = {row.order_id for row in new}
    held = set(Order.objects.using(using).filter(pk__in=wanted).values_list("pk", flat=True))
    for row in new:
        if row.order_id not in held:
            raise OrderNotMirrored(row.id, row.order_id)


_UNSETTLED = (OrderRequest.State.PENDING, OrderRequest.State.NEEDS_REVIEW)


def settle_requests(refunds: Iterable[Refund], now: datetime, using: str) -> int:
    """Record the unsettled refund requests these refunds answer (by reference and order).

    A refund carrying a request's reference is that request's only if it is the refund sent
    (its lines and amounts, ``refund_mismatch``) and no other request holds it; otherwise the
    request goes to review with the reason, and no refund is linked."""
    by_reference = {refund.reference: refund for refund in refunds if refund.reference}
    if not by_reference:
        return 0
    journal = OrderRequest.objects.using(using).filter(kind=OrderRequest.Kind.REFUND_CREATE)
    requests = journal.filter(state__in=_UNSETTLED)
    rows = [
        (pk, by_reference[str(reference)], payload)
        for pk, reference, order_id, payload in requests.filter(
            reference__in=list(by_reference)
        ).values_list("pk", "reference", "order_id", "payload")
        if by_reference[str(reference)].order_id == order_id
    ]
    holders: dict[str, int] = {}
    if rows:  # only when something would settle: a page's refunds cost the one query above
        held = journal.filter(refund_id__in=[refund.id for _, refund, _ in rows])
        holders = dict(held.values_list("refund_id", "pk"))
    settled = 0
    for pk, refund, payload in rows:
        try:
            reason = refund_mismatch(payload, refund.raw)
        except InvalidRecord as exc:
            reason = str(exc)
        if reason is None and holders.get(refund.id, pk) != pk:
            reason = (
                f"The service shows refund {refund.id} with this request's reference, but "
                f"another refund request ({holders[refund.id]}) already holds it."
            )
        if reason is not None:
            error = RefundAnswerMismatch(reason, refund.id)
            requests.filter(pk=pk).update(
                state=OrderRequest.State.NEEDS_REVIEW,
                last_error=f"{error_name(error)}: {error}",
                claimed_until=None,
                next_attempt_at=None,
                updated_at=now,
            )
            logger.error("Refund request %s not settled by refund %s: %s", pk, refund.id, reason)
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


#: Called inside a refund lookup's transaction with what was stored (``None``: unknown refund).
RefundWithin = Callable[[StoredRefunds | None, datetime], None]


def store_refund_lookup(
    lookup: RefundLookup, *, within: RefundWithin | None = None
) -> StoredRefunds | None:
    """One looked-up refund into the mirror in its own short transaction, confirmed now;
    ``None`` for a refund the service does not know (404), which is only stamped, so that it
    goes to the back of the refresh queue. ``InvalidRecord`` for an answer the app cannot use,
    or one about another refund; nothing is written then."""
    record = lookup.record
    if record is not None and (
        not isinstance(record, dict) or record.get("id") != lookup.refund_id
    ):
        shown = record.get("id") if isinstance(record, dict) else None
        raise InvalidRecord(f"lookup of refund {lookup.refund_id} answered with refund {shown!r}")
    now = timezone.now()
    using = app_database()
    with transaction.atomic(using=using):
        result = None
        if record is None:
            logger.info(
                "Refund %s is unknown to the service (404); left as it is", lookup.refund_id
            )
            stamp_refund_refreshed(lookup.refund_id, now)
        else:
            try:
                result = store_refunds([record], now=now, confirmed=True)
            except InvalidRecord as exc:
                raise InvalidRecord(f"lookup of refund {lookup.refund_id}: {exc}") from None
        if within is not None:
            within(result, now)
    return result


def stamp_refund_refreshed(refund_id: str, now: datetime) -> None:
    """Mark a refund confirmed without a new record (unknown upstream, or set aside)."""
    Refund.objects.using(app_database()).filter(pk=refund_id).update(refreshed_at=now)
