"""Turning upstream records into the values the mirror stores.

Strict where the spec is firm (id prefixes, ``status`` a string, timestamps with an offset),
tolerant of everything else (unknown fields and statuses are kept). A bad record is named by
page, record and field, and set aside by the sync: one record never stops the mirror.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, TypeVar

from ..exceptions.wire import InvalidRecord
from .record_fields import read_contact, read_number, read_payment_url, read_total  # re-exported
from .timestamps import parse_timestamp

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# CPython's C encoder, built once with the settings above; ``json.dumps`` builds an encoder
# object and a C encoder on every call, which was a third of the cost of encoding a small
# record (benchmarks/README.md, sync). No ``markers`` (the check for circular references): a
# decoded JSON document cannot contain a cycle. ``None`` where the C accelerator is missing.
_C_CANONICAL = (
    c_make_encoder(None, _CANONICAL.default, encode_basestring, None, ":", ",", True, False, True)
    if c_make_encoder is not None
    else None
)


def canonical_json(record: dict[str, Any]) -> str:
    """The record as JSON with sorted keys: hashed for the fingerprint and stored as is, so a
    record is encoded once per sync, not once to compare and again to write.

    The text is exactly ``json.dumps(record, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``: fingerprints stored by any version must keep matching.
    """
    if _C_CANONICAL is None:
        return _CANONICAL.encode(record)
    return "".join(_C_CANONICAL(record, 0))


def fingerprint(record: dict[str, Any], text: str | None = None) -> str:
    """A stable hash of a record, so an unchanged record is recognised without comparing JSON."""
    text = canonical_json(record) if text is None else text
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class ParsedCustomer:
    """The customer summary embedded in an order.

    ``raw_json`` and ``fingerprint`` are computed on first use: a walk needs them only for the
    first copy of each customer it meets (older orders' copies are skipped), and encoding every
    copy would cost as much again as encoding the orders. A customer built from its canonical
    text (``from_json``) has them already, and decodes ``raw`` only if asked.
    """

    __slots__ = (
        "_fingerprint",
        "_json",
        "_raw",
        "email_address",
        "guest",
        "id",
        "name",
        "phone_number",
        "wire_fingerprint",
    )

    def __init__(
        self,
        id: str,
        guest: bool,
        name: str,
        raw: dict[str, Any],
        email_address: str = "",
        phone_number: str = "",
    ) -> None:
        self.id = id
        self.guest = guest
        self.name = name
        self.email_address = email_address
        self.phone_number = phone_number
        self._raw: dict[str, Any] | None = raw
        self._json: str | None = None
        self._fingerprint: str | None = None
        #: The hash of the bytes it came in as, if known (``Customer.wire_fingerprint``).
        self.wire_fingerprint = ""

    @classmethod
    def from_json(
        cls,
        id: str,
        guest: bool,
        name: str,
        raw_json: str,
        fingerprint: str,
        email_address: str = "",
        phone_number: str = "",
    ) -> ParsedCustomer:
        """A customer parsed elsewhere, from its values and its canonical JSON."""
        customer = cls(id, guest, name, None, email_address, phone_number)  # type: ignore[arg-type]
        customer._json = raw_json
        customer._fingerprint = fingerprint
        return customer

    @property
    def raw(self) -> dict[str, Any]:
        if self._raw is None:
            self._raw = json.loads(self.raw_json)
        return self._raw

    @property
    def raw_json(self) -> str:
        if self._json is None:
            assert self._raw is not None  # from_json() sets _json, __init__ sets _raw
            self._json = canonical_json(self._raw)
        return self._json

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.raw, self.raw_json)
        return self._fingerprint

    def __repr__(self) -> str:
        return f"<ParsedCustomer {self.id}>"


class _ParsedRecordBase:
    """What every parsed record has: an id, its canonical JSON (sorted keys, stored as is), the
    hash of that JSON, and the decoded record ``raw``.

    ``raw`` may be left out when ``raw_json`` is given: a record built from its canonical JSON
    alone is decoded on first use (only signal receivers need the decoded record).
    """

    __slots__ = ("_raw", "fingerprint", "id", "raw_json")

    def __init__(
        self, id: str, raw: dict[str, Any] | None, fingerprint: str, raw_json: str
    ) -> None:
        self.id = id
        self._raw = raw
        self.fingerprint = fingerprint
        self.raw_json = raw_json

    @property
    def raw(self) -> dict[str, Any]:
        if self._raw is None:
            self._raw = json.loads(self.raw_json)
        return self._raw

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"


class ParsedOrder(_ParsedRecordBase):
    """An order record checked against the spec's firm rules, ready for the mirror.

    The checkout fields (``total`` … ``expires_at``) default to "unknown" (``None`` or ``""``),
    as the mirror stores a record that lacks them.
    """

    __slots__ = (
        "canceled_at",
        "completed_at",
        "currency",
        "customer",
        "expires_at",
        "initiated_at",
        "number",
        "paid_at",
        "payment_url",
        "status",
        "total",
        "wire_fingerprint",
    )

    def __init__(
        self,
        *,
        id: str,
        status: str,
        initiated_at: datetime,
        completed_at: datetime | None,
        customer: ParsedCustomer,
        raw: dict[str, Any] | None,
        fingerprint: str,
        raw_json: str,
        total: int | None = None,
        currency: str = "",
        number: str = "",
        payment_url: str = "",
        paid_at: datetime | None = None,
        canceled_at: datetime | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        super().__init__(id, raw, fingerprint, raw_json)
        self.status = status
        self.initiated_at = initiated_at
        self.completed_at = completed_at
        self.customer = customer
        self.total = total
        self.currency = currency
        self.number = number
        self.payment_url = payment_url
        self.paid_at = paid_at
        self.canceled_at = canceled_at
        self.expires_at = expires_at
        #: The hash of the bytes it came in as, if known (``Order.wire_fingerprint``): set by
        #: ``deferred_pages`` for a typed page, empty for a record decoded any other way.
        self.wire_fingerprint = ""


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


class ParsedRecord(_ParsedRecordBase):
    """A record of a resource other than orders (balance transactions, payouts...), kept raw."""

    __slots__ = ()


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
