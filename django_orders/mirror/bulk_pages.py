"""A page's records parsed in bulk, in C where that is exact: the plain path of
``page_parsing`` (its module docstring says when a page takes it), and what the light path
(``deferred_pages``) shares with it: the sorted encoding, the fingerprint's hash, a page's
timestamps read in one call, the checks that let a record skip ``parse_order``'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from ..client.decoding import decode_answer, why_not_json
from ..client.order_structs import decode_orders_page, to_records
from ..exceptions.wire import InvalidResponse
from .parsed import encode_sorted, hash_text
from .parsing import (
    ParsedCustomer,
    ParsedOrder,
    ParsedRecord,
    parse_order,
    parse_page,
    parse_record,
)
from .record_fields import read_contact, read_number, read_payment_url, read_total


def canonical_bytes(record: Any) -> bytes:
    """``canonical_json(record).encode()`` for a value of a plain body (``decode_plain``)."""
    return encode_sorted(record)


class _PlainCustomer(ParsedCustomer):
    """A customer of a plain page: encoded by msgspec when first asked (the same text)."""

    __slots__ = ()

    @property
    def raw_json(self) -> str:
        if self._json is None:
            self._json = encode_sorted(self._raw).decode()
        return self._json

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = hash_text(self.raw_json.encode())
        return self._fingerprint


# --- timestamps ----------------------------------------------------------------------------------

_COMMON = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
#: A page's timestamps, one a line, all of the common form (``parse_timestamp`` reads them
#: with ``datetime.fromisoformat``): one match in C for the whole page.
_PAGE_OF_TIMESTAMPS = re.compile(rf"(?:{_COMMON}\n)*{_COMMON}")
#: Fractions beyond microseconds are cut, never rounded (msgspec would round).
_LONG_FRACTION = re.compile(r"(\.[0-9]{6})[0-9]+")
_TO_DATETIMES = msgspec.json.Decoder(list[datetime])


def page_timestamps(texts: list[str]) -> list[datetime] | None:
    """``parse_timestamp`` of each text, or ``None`` if any is not of the common form."""
    if not texts:
        return []
    joined = "\n".join(texts)
    # A line count short of the texts' would mean a text holding a line break of its own.
    if _PAGE_OF_TIMESTAMPS.fullmatch(joined) is None or joined.count("\n") != len(texts) - 1:
        return None
    if "." in joined:
        joined = _LONG_FRACTION.sub(r"\1", joined)
    try:
        # msgspec reads an ISO 8601 string into a datetime in C; a JSON array of them is one
        # call for the page. The texts hold no quote or backslash (the pattern vouched).
        values = _TO_DATETIMES.decode(('["' + joined.replace("\n", '","') + '"]').encode())
        return [value if value.tzinfo is UTC else value.astimezone(UTC) for value in values]
    except (msgspec.DecodeError, OverflowError, ValueError):
        return None  # 2026-02-30, or a date that leaves the calendar in UTC: one by one


# --- pages ---------------------------------------------------------------------------------------

_OPTIONAL_TIMES = ("completed_at", "paid_at", "canceled_at", "expires_at")


def vouched(order_id: Any, status: Any, initiated_at: Any, customer_id: Any) -> bool:
    """Whether a record's id, status, start and customer id have the form ``parse_order``
    accepts without a word, so that the bulk path may skip its checks (anything else, even a
    valid but unusual form, is left to ``parse_page``, which gives the same value or error)."""
    return (
        type(order_id) is str
        and 3 < len(order_id) <= 64
        and order_id.startswith("or_")
        and type(status) is str
        and 0 < len(status) <= 64
        and type(initiated_at) is str
        and type(customer_id) is str
        and 3 < len(customer_id) <= 64
        and customer_id.startswith("cu_")
    )


def _orders(records: list[dict[str, Any]]) -> list[ParsedOrder] | None:
    """The page's orders, or ``None`` when ``parse_page`` must decide (``page_parsing``'s
    module docstring)."""
    texts: list[str] = []
    for record in records:
        customer = record.get("customer")
        initiated_at: Any = record.get("initiated_at")  # a str once vouched for
        if not vouched(
            record.get("id"),
            record.get("status"),
            initiated_at,
            customer.get("id") if type(customer) is dict else None,
        ):
            return None
        texts.append(initiated_at)
        for name in _OPTIONAL_TIMES:
            value = record.get(name)
            if value is not None:
                if type(value) is not str:
                    return None
                texts.append(value)
    moments = page_timestamps(texts)
    if moments is None:
        return None
    next_moment = iter(moments).__next__
    parsed: list[ParsedOrder] = []
    for record in records:
        get: Callable[[str], Any] = record.get  # the fields were checked above
        initiated_at = next_moment()  # in the order page_timestamps was given them
        completed_at = None if get("completed_at") is None else next_moment()
        paid_at = None if get("paid_at") is None else next_moment()
        canceled_at = None if get("canceled_at") is None else next_moment()
        expires_at = None if get("expires_at") is None else next_moment()
        raw_customer = get("customer")
        name = raw_customer.get("name")
        email_address, phone_number = read_contact(raw_customer)
        text = encode_sorted(record)
        total, currency = read_total(record)
        parsed.append(
            ParsedOrder(
                id=get("id"),
                status=get("status"),
                initiated_at=initiated_at,
                completed_at=completed_at,
                customer=_PlainCustomer(
                    raw_customer["id"],
                    raw_customer.get("guest") is True,
                    (name if type(name) is str else "")[:255],
                    raw_customer,
                    email_address,
                    phone_number,
                ),
                raw=record,
                fingerprint=hash_text(text),
                raw_json=text.decode(),
                total=total,
                currency=currency,
                number=read_number(record),
                payment_url=read_payment_url(record),
                paid_at=paid_at,
                canceled_at=canceled_at,
                expires_at=expires_at,
            )
        )
    return parsed


def _records(records: list[dict[str, Any]]) -> list[ParsedRecord] | None:
    parsed: list[ParsedRecord] = []
    for record in records:
        record_id = record.get("id")
        if type(record_id) is not str or not 0 < len(record_id) <= 64:
            return None
        text = encode_sorted(record)
        parsed.append(ParsedRecord(record_id, record, hash_text(text), text.decode()))
    return parsed


def parse_records(
    records: list[Any], plain: bool, parse: Callable[[Any], Any], number: int, resource: str
) -> list:
    if plain:
        fast = _orders if parse is parse_order else _records if parse is parse_record else None
        bulk = fast(records) if fast is not None else None
        if bulk is not None:
            return bulk
    return parse_page(records, parse, page_number=number, resource=resource)


def parse_body(body: bytes, parse: Callable[[Any], Any], number: int, resource: str) -> list:
    """A typed page's records parsed from its body: the schema's structs where it fits, else
    the body decoded as any other answer (``decoding.decode_answer``) and parsed as such."""
    envelope = decode_orders_page(body)
    if envelope is not None:
        return parse_records(to_records(envelope.page.orders), True, parse, number, resource)
    try:
        data, plain = decode_answer(body)
    except ValueError as exc:
        # What the transport says of such a body. The light reading found it well formed JSON
        # but does not look inside what it skips: text that is not UTF-8, or nesting deeper
        # than MAX_JSON_DEPTH, there. Checking every body for both would slow the fetching
        # thread on every order (figures: benchmarks/README.md), and such a record can never
        # have been stored, so it is compared, hence decoded, whenever it is on a page: here.
        raise InvalidResponse(
            f"{resource} page {number}: POST /{resource}/page answered with a body that is "
            f"not JSON ({why_not_json(exc, body)})"
        ) from None
    return parse_records(data["page"]["orders"], plain, parse, number, resource)


def body_records(body: bytes) -> list[Any]:
    """The orders of a typed page's body as decoded dicts, as any other answer's
    (``decoding.decode_answer``): for parsing them one by one (``parse_leniently``)."""
    data, _plain = decode_answer(body)  # read light already: JSON, or ValueError
    return data["page"]["orders"]
