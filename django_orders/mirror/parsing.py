"""Turning upstream records into the values the mirror stores.

Strict where the spec is firm (id prefixes, ``status`` a string, timestamps with an offset),
tolerant of everything else (unknown fields and statuses are kept). A bad record is named by
page, record and field, and set aside by the sync: one record never stops the mirror.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from ..exceptions.wire import InvalidRecord
from ..wire_json import decode_answer
from .parsed import ORDER_READERS, ORDER_TIMES, _ParsedRecordBase, canonical_bytes, hash_text
from .parsed import ParsedCustomer as ParsedCustomer
from .parsed import ParsedOrder as ParsedOrder
from .parsed import ParsedRecord as ParsedRecord
from .parsed import canonical_json as canonical_json
from .parsed import fingerprint as fingerprint
from .parsed import read_contact as read_contact
from .parsed import read_number as read_number
from .parsed import read_payment_url as read_payment_url
from .parsed import read_total as read_total
from .timestamps import parse_timestamp, read_timestamps


def _require_id(value: Any, prefix: str, field: str) -> str:
    if not isinstance(value, str) or not value.startswith(prefix) or len(value) <= len(prefix):
        raise InvalidRecord(f"{field} must be a string starting with {prefix!r}, not {value!r}")
    if len(value) > 64:
        raise InvalidRecord(f"{field} is longer than 64 characters: {value[:80]!r}")
    return value


def parse_customer(record: Any, *, field: str = "customer", plain: bool = False) -> ParsedCustomer:
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
        plain=plain,
    )


def parse_orders(
    records: Sequence[Any], *, plain: bool = False
) -> list[ParsedOrder | InvalidRecord]:
    """Parse order records: each one's ``ParsedOrder``, or the ``InvalidRecord`` naming the
    field (and id, when it has one) that keeps it out of the mirror.

    The one decoder of orders: pages, lookups and the create answer alike (``parse_order`` is
    one record of it), each field read by its reader as ``ParsedOrder`` declares it
    (``parsed.ORDER_READERS``). Their timestamps are read together (``read_timestamps``).
    ``plain``: the records came from a body without floats (``canonical_bytes``).
    """
    texts = [
        value
        for record in records
        if type(record) is dict
        for value in map(record.get, ORDER_TIMES)
        if type(value) is str
    ]
    known = read_timestamps(texts)

    def moment(value: Any, field: str) -> datetime:
        found = known.get(value) if type(value) is str else None
        return found if found is not None else parse_timestamp(value, field=field)

    parsed: list[ParsedOrder | InvalidRecord] = []
    for record in records:
        try:
            parsed.append(_order(record, plain, moment))
        except InvalidRecord as exc:
            parsed.append(exc)
    return parsed


def parse_order(record: Any, *, plain: bool = False) -> ParsedOrder:
    """One order record parsed (``parse_orders``), or its ``InvalidRecord`` raised."""
    (parsed,) = parse_orders([record], plain=plain)
    if isinstance(parsed, InvalidRecord):
        raise parsed
    return parsed


def _order(record: Any, plain: bool, moment: Callable[[Any, str], datetime]) -> ParsedOrder:
    if not isinstance(record, dict):
        raise InvalidRecord(f"an order must be an object, not {type(record).__name__}")
    order_id = _require_id(record.get("id"), "or_", "id")
    order = ParsedOrder.__new__(ParsedOrder)
    try:
        for name, read in ORDER_READERS:
            setattr(order, name, read(record, name, moment))
        order.customer = parse_customer(record.get("customer"), plain=plain)
    except (InvalidRecord, ValueError) as exc:  # ValueError: a reader's (``parsed.ORDER_READERS``)
        raise InvalidRecord(f"order {order_id}: {exc}") from None
    text = canonical_bytes(record, plain)
    _ParsedRecordBase.__init__(order, order_id, record, hash_text(text), text.decode())
    order.wire_fingerprint = ""
    return order


def parse_record(record: Any, *, plain: bool = False) -> ParsedRecord:
    """A generic ``/page`` record: only an ``id`` is required (the mirror's key)."""
    if not isinstance(record, dict):
        raise InvalidRecord(f"a record must be an object, not {type(record).__name__}")
    record_id = record.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise InvalidRecord(f"id must be a non-empty string, not {record_id!r}")
    if len(record_id) > 64:
        raise InvalidRecord(f"id is longer than 64 characters: {record_id[:80]!r}")
    text = canonical_bytes(record, plain)
    return ParsedRecord(
        id=record_id, raw=record, fingerprint=hash_text(text), raw_json=text.decode()
    )


def record_position(resource: str, page_number: int, index: int, count: int, record: Any) -> str:
    """``orders page 3, record 17 of 25 (id or_abc)``: where a record is, for an operator;
    ``record`` as decoded (``None`` if it could not be)."""
    record_id = record.get("id") if isinstance(record, dict) else None
    where = f"id {record_id}" if isinstance(record_id, str) else "no valid id"
    return f"{resource} page {page_number}, record {index} of {count} ({where})"


class LenientPage(list):
    """The records of a page that parsed, and ``set_aside``: (where, error) for each that did
    not, where naming the page, the record's position and its id (``record_position``). One
    malformed record never keeps the rest of its page, nor later pages, from the mirror."""

    def __init__(self, parsed: list, set_aside: list[tuple[str, InvalidRecord]]) -> None:
        super().__init__(parsed)
        self.set_aside = set_aside


def decode_record(item: Any) -> tuple[Any, bool]:
    """A page's record as the parsers take it, and whether it is ``plain``: a record kept as
    its bytes (``msgspec.Raw``, ``fetch_page(..., raw=True)``) decoded as any answer's body is
    (``wire_json.decode_answer``: the same values as ``json.loads``, NUL and lone surrogates
    made storable); a record decoded already, as it is. Bytes that are not JSON are an
    ``InvalidRecord``: that record is set aside, not the page."""
    if type(item) is not msgspec.Raw:
        return item, False
    try:
        return decode_answer(bytes(item))
    except ValueError as exc:
        raise InvalidRecord(f"the record is not JSON ({str(exc)[:200]})") from None


def read_page(kind: Any, records: Sequence[Any], page_number: int) -> LenientPage:
    """A walk's page of the resource ``kind`` (``Page.records``: each record as its bytes), its
    malformed records set aside: ``Resource.read_page``."""
    page: LenientPage = kind.read_page(records, page_number=page_number)
    return page


def read_records(
    records: Sequence[Any], parse: Callable[..., Any], *, page_number: int, resource: str
) -> LenientPage:
    """A page's records decoded (in one call for the page, ``decode_record`` each if that
    fails) and parsed, each malformed one set aside: how a page of any resource without a
    reading of its own is read."""
    values, plain = decode_records(records)
    parsed: list = []
    set_aside: list[tuple[str, InvalidRecord]] = []
    for index, value in enumerate(values, start=1):
        try:
            if isinstance(value, InvalidRecord):
                raise value
            parsed.append(parse(value, plain=plain))
        except InvalidRecord as exc:
            record = None if isinstance(value, InvalidRecord) else value
            where = record_position(resource, page_number, index, len(records), record)
            set_aside.append((where, exc))
    return LenientPage(parsed, set_aside)


def decode_records(records: Sequence[Any]) -> tuple[list[Any], bool]:
    """``decode_record`` of each record, in one call for them all where they can be (one call
    costs less than one a record), and whether all are ``plain``; a record that is not JSON is
    its ``InvalidRecord``."""
    if not records or type(records[0]) is not msgspec.Raw:
        return list(records), False
    try:
        values, plain = decode_answer(b"[" + b",".join(records) + b"]")
        return values, plain
    except ValueError:
        decoded: list[Any] = []
        for item in records:
            try:
                decoded.append(decode_record(item)[0])
            except InvalidRecord as exc:
                decoded.append(exc)
        return decoded, False
