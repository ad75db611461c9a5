"""Turning upstream order records into the values the mirror stores.

Strict where the spec is firm (id prefixes, ``status`` a string, timestamps with an offset),
tolerant of everything else: unknown fields and unknown statuses are kept, never rejected.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from .exceptions import InvalidRecord

_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"(?:(Z)|([+-])(\d{2}):?(\d{2}))$",
    re.IGNORECASE,
)


def parse_timestamp(value: Any, *, field: str = "timestamp") -> datetime:
    """ISO 8601 with ``Z`` or an offset and any number of fractional digits -> aware UTC.

    Fractions beyond microseconds are truncated (never rounded up into the next second). A
    timestamp without an offset is refused: guessing its zone would silently shift it.
    """
    match = _TIMESTAMP.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidRecord(
            f"{field} must be an ISO 8601 timestamp with Z or an offset, not {value!r}"
        )
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    if zulu:
        zone = UTC
    else:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        zone = timezone(-offset if sign == "-" else offset)
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, zone
        )
    except ValueError as exc:
        raise InvalidRecord(f"{field} is not a real date and time: {value!r} ({exc})") from None
    return moment.astimezone(UTC)


def fingerprint(record: dict[str, Any]) -> str:
    """A stable hash of a record, so an unchanged record is recognised without comparing JSON."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class ParsedCustomer:
    id: str
    guest: bool
    name: str
    raw: dict[str, Any]
    fingerprint: str


@dataclass(frozen=True, slots=True)
class ParsedOrder:
    id: str
    status: str
    initiated_at: datetime
    completed_at: datetime | None
    customer: ParsedCustomer
    raw: dict[str, Any]
    fingerprint: str


def _require_id(value: Any, prefix: str, field: str) -> str:
    if not isinstance(value, str) or not value.startswith(prefix) or len(value) <= len(prefix):
        raise InvalidRecord(f"{field} must be a string starting with {prefix!r}, not {value!r}")
    if len(value) > 64:
        raise InvalidRecord(f"{field} is longer than 64 characters: {value[:80]!r}")
    return value


def parse_customer(record: Any, *, field: str = "customer") -> ParsedCustomer:
    if not isinstance(record, dict):
        raise InvalidRecord(f"{field} must be an object, not {type(record).__name__}")
    customer_id = _require_id(record.get("id"), "cu_", f"{field}.id")
    name = record.get("name")
    return ParsedCustomer(
        id=customer_id,
        guest=record.get("guest") is True,
        name=(name if isinstance(name, str) else "")[:255],
        raw=record,
        fingerprint=fingerprint(record),
    )


def parse_order(record: Any) -> ParsedOrder:
    """Parse one order record; ``InvalidRecord`` names the field (and id, when it has one)."""
    if not isinstance(record, dict):
        raise InvalidRecord(f"an order must be an object, not {type(record).__name__}")
    order_id = _require_id(record.get("id"), "or_", "id")
    try:
        status = record.get("status")
        if not isinstance(status, str) or not status:
            raise InvalidRecord(f"status must be a non-empty string, not {status!r}")
        if len(status) > 64:
            raise InvalidRecord(f"status is longer than 64 characters: {status[:80]!r}")
        initiated_at = parse_timestamp(record.get("initiated_at"), field="initiated_at")
        completed_raw = record.get("completed_at")
        completed_at = (
            None if completed_raw is None else parse_timestamp(completed_raw, field="completed_at")
        )
        customer = parse_customer(record.get("customer"))
    except InvalidRecord as exc:
        raise InvalidRecord(f"order {order_id}: {exc}") from None
    return ParsedOrder(
        id=order_id,
        status=status,
        initiated_at=initiated_at,
        completed_at=completed_at,
        customer=customer,
        raw=record,
        fingerprint=fingerprint(record),
    )
