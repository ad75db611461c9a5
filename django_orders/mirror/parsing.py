"""Turning upstream records into the values the mirror stores.

Strict where the spec is firm (id prefixes, ``status`` a string, timestamps with an offset),
tolerant of everything else (unknown fields and statuses are kept). A bad record is named by
page, record and field, and set aside by the sync: one record never stops the mirror.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..exceptions.wire import InvalidRecord
from .parsed import ParsedCustomer as ParsedCustomer
from .parsed import ParsedOrder as ParsedOrder
from .parsed import ParsedRecord as ParsedRecord
from .parsed import canonical_json as canonical_json
from .parsed import fingerprint as fingerprint
from .record_fields import read_contact, read_number, read_payment_url, read_total  # re-exported
from .timestamps import parse_timestamp


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
    email_address, phone_number = read_contact(record)
    return ParsedCustomer(
        id=customer_id,
        guest=record.get("guest") is True,
        name=(name if isinstance(name, str) else "")[:255],
        raw=record,
        email_address=email_address,
        phone_number=phone_number,
    )


def parse_order(record: Any) -> ParsedOrder:
    """Parse one order record; ``InvalidRecord`` names the field (and id, when it has one)."""
    if not isinstance(record, dict):
        raise InvalidRecord(f"an order must be an object, not {type(record).__name__}")
    order_id = _require_id(record.get("id"), "or_", "id")
    get = record.get
    try:
        status = get("status")
        if not isinstance(status, str) or not status:
            raise InvalidRecord(f"status must be a non-empty string, not {status!r}")
        if len(status) > 64:
            raise InvalidRecord(f"status is longer than 64 characters: {status[:80]!r}")
        initiated_at = parse_timestamp(get("initiated_at"), field="initiated_at")
        # Inlined parse_optional_timestamp: the sync calls this for every order it reads.
        completed_at = get("completed_at")
        if completed_at is not None:
            completed_at = parse_timestamp(completed_at, field="completed_at")
        paid_at = get("paid_at")
        if paid_at is not None:
            paid_at = parse_timestamp(paid_at, field="paid_at")
        canceled_at = get("canceled_at")
        if canceled_at is not None:
            canceled_at = parse_timestamp(canceled_at, field="canceled_at")
        expires_at = get("expires_at")
        if expires_at is not None:
            expires_at = parse_timestamp(expires_at, field="expires_at")
        customer = parse_customer(get("customer"))
    except InvalidRecord as exc:
        raise InvalidRecord(f"order {order_id}: {exc}") from None
    total, currency = read_total(record)
    text = canonical_json(record)
    return ParsedOrder(
        id=order_id,
        status=status,
        initiated_at=initiated_at,
        completed_at=completed_at,
        customer=customer,
        raw=record,
        fingerprint=fingerprint(record, text),
        raw_json=text,
        total=total,
        currency=currency,
        number=read_number(record),
        payment_url=read_payment_url(record),
        paid_at=paid_at,
        canceled_at=canceled_at,
        expires_at=expires_at,
    )


def parse_record(record: Any) -> ParsedRecord:
    """A generic ``/page`` record: only an ``id`` is required (the mirror's key)."""
    if not isinstance(record, dict):
        raise InvalidRecord(f"a record must be an object, not {type(record).__name__}")
    record_id = record.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise InvalidRecord(f"id must be a non-empty string, not {record_id!r}")
    if len(record_id) > 64:
        raise InvalidRecord(f"id is longer than 64 characters: {record_id[:80]!r}")
    text = canonical_json(record)
    return ParsedRecord(
        id=record_id, raw=record, fingerprint=fingerprint(record, text), raw_json=text
    )


T = TypeVar("T")


def parse_page(
    records: Sequence[Any], parse: Callable[[Any], T], *, page_number: int, resource: str
) -> list[T]:
    """Parse every record of a page, or raise ``InvalidRecord`` naming page, record and field.

    The message reads e.g. ``orders page 3, record 17 of 25 (id or_abc): order or_abc:
    initiated_at must be ...``, which is what an operator needs to report it upstream.
    """
    parsed: list[T] = []
    for index, record in enumerate(records, start=1):
        try:
            parsed.append(parse(record))
        except InvalidRecord as exc:
            where = record_position(resource, page_number, index, records)
            raise InvalidRecord(f"{where}: {exc}") from None
    return parsed


def record_position(resource: str, page_number: int, index: int, records: Sequence[Any]) -> str:
    """``orders page 3, record 17 of 25 (id or_abc)``: where a record is, for an operator."""
    record = records[index - 1]
    record_id = record.get("id") if isinstance(record, dict) else None
    where = f"id {record_id}" if isinstance(record_id, str) else "no valid id"
    return f"{resource} page {page_number}, record {index} of {len(records)} ({where})"


class LenientPage(list):
    """The records of a page that parsed, and ``set_aside``: (where, error) for each that did
    not, where naming the page, the record's position and its id (``record_position``)."""

    def __init__(self, parsed: list, set_aside: list[tuple[str, InvalidRecord]]) -> None:
        super().__init__(parsed)
        self.set_aside = set_aside


def parse_leniently(
    records: Sequence[Any], parse: Callable[[Any], Any], *, page_number: int, resource: str
) -> LenientPage:
    """``parse_page`` that sets a malformed record aside instead of failing the page: the same
    values for every record it parses, in the same order. For the sync: one bad record must not
    keep every later record from being mirrored, run after run."""
    parsed: list = []
    set_aside: list[tuple[str, InvalidRecord]] = []
    for index, record in enumerate(records, start=1):
        try:
            parsed.append(parse(record))
        except InvalidRecord as exc:
            set_aside.append((record_position(resource, page_number, index, records), exc))
    return LenientPage(parsed, set_aside)
