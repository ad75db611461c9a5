"""The refunds resource: ``/refunds/page`` (collection ``refunds``) into ``Refund``.

A page's records are read with the refund schema (``mirror.refunds``) and mapped to rows
(``refunds.refund_row``) while parsing, so a malformed refund is set aside before its page is
written; the page is then stored by the one write rule of refunds (``refunds.store_refunds``):
only forward, ``refund_status_changed`` once per real change. A refund whose order the mirror
does not hold is set aside with that reason (``OrderNotMirrored``): the order's own sync, or a
lookup of it, brings its refunds along; one that names another order than the stored
refund's is set aside too (``RefundOrderChanged``: a refund never changes its order). Every
walk ends with the refresh of the refunds still pending or processing (``refresh_refunds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from ...exceptions.wire import InvalidRecord
from ...models.mirror import Refund
from ..events import PAGE
from ..parsing import LenientPage, read_records
from ..refunds import decode_refund, refund_row, store_refunds
from ..result import MirrorResult
from .registry import Resource

#: The property of ``/refunds/page`` answers that holds the records.
COLLECTION = "refunds"


class ParsedRefund:
    """A refund record of a page, checked field by field (``refund_row``): its id and the
    record as sent."""

    __slots__ = ("id", "order_id", "raw", "status")

    def __init__(self, id: str, order_id: str, status: str, raw: dict[str, Any]) -> None:
        self.id = id
        self.order_id = order_id
        self.status = status
        self.raw = raw

    def __repr__(self) -> str:
        return f"<ParsedRefund {self.id}>"


def parse_refund(record: Any, *, plain: bool = False) -> ParsedRefund:
    """One record of a page; ``InvalidRecord`` naming the refund and the field. (``plain``, as
    every resource's ``parse`` takes it, is of no use here: a refund keeps no canonical text.)"""
    if not isinstance(record, dict):
        raise InvalidRecord(f"a refund must be an object, not {type(record).__name__}")
    row = refund_row(decode_refund(record), record, timezone.now())
    if len(row.id) > 64 or len(row.order_id) > 64:
        raise InvalidRecord(f"refund {row.id[:80]!r}: an id is longer than 64 characters")
    return ParsedRefund(row.id, row.order_id, row.status, record)


def store_page(
    records: Sequence[ParsedRefund],
    *,
    now: datetime,
    sent_at: datetime | None = None,
    known_customers: Any = None,
) -> MirrorResult:
    """Store a page of refunds in the caller's transaction: each row confirmed now, new ones
    only for orders the mirror holds (``OrderNotMirrored`` otherwise, which the page write
    turns into that refund set aside)."""
    stored = store_refunds(
        [record.raw for record in records], now=now, confirmed=True, check_orders=True, origin=PAGE
    )
    return MirrorResult(created=stored.created, updated=stored.updated, unchanged=stored.unchanged)


class RefundsResource(Resource):
    """Refunds: ``/refunds/page`` into ``Refund``, by the refunds' one write rule."""

    name = "refunds"
    collection = COLLECTION
    model = Refund
    noun = ("refund", "refunds")
    refresh_refunds = True

    def parse(self, record: Any, *, plain: bool = False) -> ParsedRefund:
        return parse_refund(record, plain=plain)

    def read_page(self, records: Sequence[Any], *, page_number: int) -> LenientPage:
        return read_records(records, self.parse, page_number=page_number, resource=self.name)

    def store(
        self,
        records: Sequence[Any],
        *,
        now: datetime,
        sent_at: datetime | None = None,
        known_customers: set[str] | None = None,
    ) -> MirrorResult:
        return store_page(records, now=now, sent_at=sent_at)


REFUNDS = RefundsResource()
