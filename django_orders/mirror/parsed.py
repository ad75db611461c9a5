"""What a parsed record is (``ParsedOrder``, ``ParsedCustomer``, ``ParsedRecord``), its
canonical text and fingerprint, and the order's fields declared once with their readers.
Imports nothing of the package, so the writers can name these types without the parsers
(``parsing``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

import msgspec

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# CPython's C encoder, built once with the settings above; ``json.dumps`` builds an encoder
# object and a C encoder on every call, a large share of the cost of encoding a small record
# (figures: benchmarks/README.md, sync). No ``markers`` (the check for circular references): a
# decoded JSON document cannot contain a cycle. ``None`` where the C accelerator is missing.
_C_CANONICAL = (
    c_make_encoder(None, _CANONICAL.default, encode_basestring, None, ":", ",", True, False, True)
    if c_make_encoder is not None
    else None
)


#: msgspec's sorted encoding: ``canonical_json``'s text, as bytes, for decoded JSON values.
encode_sorted = msgspec.json.Encoder(order="sorted").encode


def hash_text(text: bytes) -> str:
    """The fingerprint of canonical text: what ``wire_fingerprint`` and the light path hash."""
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def canonical_json(record: dict[str, Any]) -> str:
    """The record as JSON with sorted keys: hashed for the fingerprint and stored as is, so a
    record is encoded once per sync, not once to compare and again to write.

    The text is exactly ``json.dumps(record, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``: fingerprints stored by any version must keep matching.
    """
    if _C_CANONICAL is None:
        return _CANONICAL.encode(record)
    return "".join(_C_CANONICAL(record, 0))


def canonical_bytes(record: dict[str, Any], plain: bool = False) -> bytes:
    """``canonical_json(record)``, encoded. ``plain``: the record was decoded by msgspec from a
    body without floats (``wire_json.decode_answer``), so msgspec's sorted encoding, in C, is
    that very text."""
    return encode_sorted(record) if plain else canonical_json(record).encode()


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
        "_plain",
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
        plain: bool = False,
    ) -> None:
        self.id = id
        self.guest = guest
        self.name = name
        self.email_address = email_address
        self.phone_number = phone_number
        self._raw: dict[str, Any] | None = raw
        self._json: str | None = None
        self._fingerprint: str | None = None
        #: ``raw`` came from a body without floats (``canonical_bytes``).
        self._plain = plain
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
            self._encode()
        assert self._json is not None
        return self._json

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._encode()
        assert self._fingerprint is not None
        return self._fingerprint

    def _encode(self) -> None:
        if self._json is None:
            assert self._raw is not None  # from_json() sets _json, __init__ sets _raw
            text = canonical_bytes(self._raw, self._plain)
            self._json = text.decode()
        else:
            text = self._json.encode()
        self._fingerprint = hash_text(text)

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


# --- the order's fields, declared once -----------------------------------------------------------
#
# Each field of ``ParsedOrder`` below that is read from the record names its reader (``read``
# in its metadata): the decoder (``parsing.parse_orders``), the ``Order`` columns the mirror
# writes and their update list (``store``), and the row (``rows.order_row``) all derive from
# that one declaration (``ORDER_FIELDS``). A reader takes the record, the field's name and
# ``moment`` (the decoder's timestamp reader, which reads a page's timestamps together), and
# raises ``ValueError`` naming what is wrong where the spec is firm (the decoder makes it the
# record's ``InvalidRecord``; this module imports no exception of the package). Tolerant
# where the spec is (module ``parsing``): a value of the wrong type or of more than its column's
# size reads as "unknown" (``None`` or ``""``), never a failed page. A hot path: ``type(x) is
# dict``, not ``isinstance``.

#: The range of the ``total`` column (a signed 64-bit BigIntegerField).
TOTAL_MIN, TOTAL_MAX = -(2**63), 2**63 - 1
CURRENCY_MAX, NUMBER_MAX, _URL_MAX, EMAIL_MAX, PHONE_MAX = 16, 255, 2048, 254, 64

#: ``moment(value, field)``: a timestamp's text as an aware datetime, or ``InvalidRecord``.
Moment = Callable[[Any, str], datetime]


def read_total(record: dict[str, Any]) -> tuple[int | None, str]:
    """``line_item_group.total`` as (minor units, lower-case currency).

    The value must be an integer (JSON ``true``, a float, a string: ``None``; money is never a
    float), the currency a string (``""`` otherwise); either may be known without the other.
    """
    group = record.get("line_item_group")
    total = group.get("total") if type(group) is dict else None
    if type(total) is not dict:
        return None, ""
    value = total.get("value")
    currency = total.get("currency")
    return (
        value if type(value) is int and TOTAL_MIN <= value <= TOTAL_MAX else None,
        currency.lower() if type(currency) is str and len(currency) <= CURRENCY_MAX else "",
    )


def read_number(record: dict[str, Any]) -> str:
    """The shop's order number (``number``); ``""`` when absent, not a string, or too long."""
    number = record.get("number")
    return number if type(number) is str and len(number) <= NUMBER_MAX else ""


def read_payment_url(record: dict[str, Any]) -> str:
    """The hosted payment page, ``invoice.format.web.url``: only an absolute ``http(s)`` URL
    without spaces or control characters, else ``""``. Staff follow it from the admin and a
    shop may redirect a customer to it, so a ``javascript:`` or relative value never passes."""
    invoice = record.get("invoice")
    formats = invoice.get("format") if type(invoice) is dict else None
    web = formats.get("web") if type(formats) is dict else None
    url = web.get("url") if type(web) is dict else None
    return checked_payment_url(url)


def checked_payment_url(url: Any) -> str:
    """``url`` if ``read_payment_url`` would take it as the payment page, else ``""``."""
    if (
        type(url) is not str
        or not 8 < len(url) <= _URL_MAX
        or not url[:8].lower().startswith(("https://", "http://"))
        or not url.isprintable()
        or " " in url
    ):
        return ""
    return url


def read_contact(customer: dict[str, Any]) -> tuple[str, str]:
    """A customer record's (``email_address``, ``phone_number``); ``""`` for each one that is
    absent, not a string, or too long for its column (a cut address would be a wrong one)."""
    email = customer.get("email_address")
    phone = customer.get("phone_number")
    return (
        email if type(email) is str and len(email) <= EMAIL_MAX else "",
        phone if type(phone) is str and len(phone) <= PHONE_MAX else "",
    )


def _status(record: dict[str, Any], name: str, moment: Moment) -> str:
    status = record.get(name)
    if not isinstance(status, str) or not status:
        raise ValueError(f"{name} must be a non-empty string, not {status!r}")
    if len(status) > 64:
        raise ValueError(f"{name} is longer than 64 characters: {status[:80]!r}")
    return status


def _required_time(record: dict[str, Any], name: str, moment: Moment) -> datetime:
    return moment(record.get(name), name)


def _optional_time(record: dict[str, Any], name: str, moment: Moment) -> datetime | None:
    value = record.get(name)
    return None if value is None else moment(value, name)


def _total(record: dict[str, Any], name: str, moment: Moment) -> int | None:
    return read_total(record)[0]


def _currency(record: dict[str, Any], name: str, moment: Moment) -> str:
    return read_total(record)[1]


def _number(record: dict[str, Any], name: str, moment: Moment) -> str:
    return read_number(record)


def _payment_url(record: dict[str, Any], name: str, moment: Moment) -> str:
    return read_payment_url(record)


@dataclass(slots=True, init=False, eq=False, repr=False)
class ParsedOrder(_ParsedRecordBase):
    """An order record checked against the spec's firm rules, ready for the mirror: the one
    declaration of the order's fields (module comment above). Built by ``parsing.parse_orders``.

    The checkout fields (``total`` … ``expires_at``) default to "unknown" (``None`` or ``""``),
    as the mirror stores a record that lacks them.
    """

    #: Its customer summary (read by the decoder, which names a fault in it ``customer.*``).
    customer: ParsedCustomer
    #: The hash of the bytes it came in as, if known (``Order.wire_fingerprint``): set by a
    #: walk's page (``resources.orders``), empty for a record decoded by the client.
    wire_fingerprint: str
    status: str = field(metadata={"read": _status})
    initiated_at: datetime = field(metadata={"read": _required_time})
    completed_at: datetime | None = field(metadata={"read": _optional_time})
    paid_at: datetime | None = field(metadata={"read": _optional_time})
    canceled_at: datetime | None = field(metadata={"read": _optional_time})
    expires_at: datetime | None = field(metadata={"read": _optional_time})
    total: int | None = field(metadata={"read": _total})
    currency: str = field(metadata={"read": _currency})
    number: str = field(metadata={"read": _number})
    payment_url: str = field(metadata={"read": _payment_url})


#: The fields of ``ParsedOrder`` read from the record, and their readers, in declaration order:
#: the ``Order`` columns of the same names (module comment above).
ORDER_READERS: tuple[tuple[str, Callable[[dict[str, Any], str, Moment], Any]], ...] = tuple(
    (f.name, f.metadata["read"]) for f in fields(ParsedOrder) if "read" in f.metadata
)
ORDER_FIELDS: tuple[str, ...] = tuple(name for name, _read_ in ORDER_READERS)
#: Those that are timestamps (the decoder reads a page's together).
ORDER_TIMES: tuple[str, ...] = tuple(
    name for name, read in ORDER_READERS if read in (_required_time, _optional_time)
)


class ParsedRecord(_ParsedRecordBase):
    """A record of a resource other than orders (balance transactions, payouts...), kept raw."""

    __slots__ = ()
