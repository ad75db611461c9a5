"""The refund record on the wire (``inttegro.refund.Refund``), as typed msgspec structs.

The one reading of every answer that carries refunds (create, cancel, lookup, an order's
``refunds[]``). Unknown fields are allowed and a status is any string (the provider adds them);
what is missing or of the wrong type is an ``InvalidRecord`` naming the refund and the field.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct

from ..exceptions.wire import InvalidRecord

__all__ = [
    "RefundFailure",
    "RefundMoney",
    "RefundStruct",
    "decode_refund",
    "embedded_refunds",
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
