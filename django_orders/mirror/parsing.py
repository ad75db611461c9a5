"""Turning upstream records into the values the mirror stores.

Strict where the spec is firm (id prefixes, ``status`` a string, timestamps with an offset),
tolerant of everything else (unknown fields and statuses are kept). A bad record is named by
page, record and field, and set aside by the sync: one record never stops the mirror.

Upstream timestamps become aware UTC datetimes: ISO 8601 with ``Z`` or an offset, any number of
fractional digits, and the forms the provider's SDK also reads (api-notes.md). A timestamp that
cannot be read is an ``InvalidRecord`` naming its field, never a guess. No models here: the
money records' decoder, which a data migration imports, reads its timestamps with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
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

_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"(?:(Z)|([+-])(\d{2}):?(\d{2}))$",
    re.IGNORECASE,
)

#: Forms the provider's SDK reads that RFC 3339 leaves out but that say one instant all the
#: same: no seconds (``10:30Z``, seconds 0) and an offset of whole hours (``+05``). Only tried
#: after ``_TIMESTAMP`` failed, so the common forms pay nothing for it. Still refused: no
#: offset (the zone would be a guess), a time of hours only, anything else.
_TOLERATED_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"(?:(Z)|([+-])(\d{2})(?::?(\d{2}))?)$",
    re.IGNORECASE,
)


def parse_timestamp(value: Any, *, field: str = "timestamp") -> datetime:
    """ISO 8601 with ``Z`` or an offset and any number of fractional digits -> aware UTC.

    Fractions beyond microseconds are truncated (never rounded up into the next second). A
    timestamp without an offset is refused: guessing its zone would silently shift it. Also
    read, as the provider's SDK reads them: a time without seconds and an offset of whole hours
    (``2024-05-01T10:30+05``).
    """
    match = _TIMESTAMP.match(value) if isinstance(value, str) else None
    if match is None:
        return _parse_tolerated(value, field)
    groups = match.groups()
    fraction = groups[6]
    if (fraction is None or len(fraction) <= 6) and groups[3] < "24":
        # The common forms, once the pattern has vouched for the shape: the standard parser
        # reads them faster than the steps below (benchmarks/README.md). It refuses lower-case
        # letters and impossible dates, which then take the steps below (and their message);
        # hour 24, which newer Pythons read as the next midnight, never goes to it.
        try:
            return datetime.fromisoformat(value).astimezone(UTC)
        except (ValueError, OverflowError):
            pass
    return _build(value, field, groups)


def _parse_tolerated(value: Any, field: str) -> datetime:
    """The slow path: the forms of ``_TOLERATED_TIMESTAMP``, or the error naming the field."""
    match = _TOLERATED_TIMESTAMP.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidRecord(
            f"{field} must be an ISO 8601 timestamp with Z or an offset, not {value!r}"
        )
    return _build(value, field, match.groups())


def _build(value: str, field: str, groups: tuple[str | None, ...]) -> datetime:
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = groups
    assert year and month and day  # groups the pattern always matches
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        # Both inside the try: an offset of 24 hours or more (``+25:00``) is refused by
        # ``timezone`` itself, and must fail as a bad record naming the field like a bad date.
        if zulu:
            zone = UTC
        else:
            offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
            zone = timezone(-offset if sign == "-" else offset)
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            micro,
            zone,
        )
    except ValueError as exc:
        raise InvalidRecord(f"{field} is not a real date and time: {value!r} ({exc})") from None
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        # 9999-12-31T23:59:59-01:00 or 0001-01-01T00:00:00+01:00: real, but not in UTC.
        raise InvalidRecord(
            f"{field} is outside the dates that can be stored in UTC: {value!r}"
        ) from None


def parse_optional_timestamp(value: Any, *, field: str) -> datetime | None:
    """``None`` for a missing or null timestamp, otherwise exactly ``parse_timestamp``.

    Strict on purpose, like ``completed_at``: a present timestamp that cannot be read is a
    broken record, and the sync reports it naming the page, the record and the field rather
    than storing a guess.
    """
    return None if value is None else parse_timestamp(value, field=field)


# --- many at once --------------------------------------------------------------------------------

_COMMON = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)

#: Timestamps one a line, all of the common form: one match in C for all of them.
_LINES_OF_TIMESTAMPS = re.compile(rf"(?:{_COMMON}\n)*{_COMMON}")

#: Fractions beyond microseconds are cut, never rounded (msgspec would round).
_LONG_FRACTION = re.compile(r"(\.[0-9]{6})[0-9]+")

_TO_DATETIMES = msgspec.json.Decoder(list[datetime])


def read_timestamps(texts: Sequence[str]) -> dict[str, datetime]:
    """``parse_timestamp`` of each text, read in two calls in C for them all (a page's
    orders'); empty if any is not of the common form, or not a real date: each is then read
    by ``parse_timestamp`` alone, which says what is wrong with it."""
    if not texts:
        return {}
    joined = "\n".join(texts)
    # A line count short of the texts' would mean a text holding a line break of its own.
    if _LINES_OF_TIMESTAMPS.fullmatch(joined) is None or joined.count("\n") != len(texts) - 1:
        return {}
    if "." in joined:
        joined = _LONG_FRACTION.sub(r"\1", joined)
    try:
        # The texts hold no quote or backslash: the pattern vouched.
        values = _TO_DATETIMES.decode(('["' + joined.replace("\n", '","') + '"]').encode())
        moments = [value if value.tzinfo is UTC else value.astimezone(UTC) for value in values]
    except (msgspec.DecodeError, OverflowError, ValueError):
        return {}  # 2026-02-30, or a date that leaves the calendar in UTC
    return dict(zip(texts, moments, strict=True))


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
