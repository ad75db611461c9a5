"""What a parsed record is (``ParsedOrder``, ``ParsedCustomer``, ``ParsedRecord``) and its
canonical text and fingerprint. Imports nothing of the package, so the writers can name these
types without the parsers (``parsing``).
"""

from __future__ import annotations

import hashlib
import json
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
        #: a walk's page (``order_pages``), empty for a record decoded by the client.
        self.wire_fingerprint = ""


class ParsedRecord(_ParsedRecordBase):
    """A record of a resource other than orders (balance transactions, payouts...), kept raw."""

    __slots__ = ()
