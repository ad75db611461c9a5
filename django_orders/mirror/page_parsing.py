"""Decoding and parsing a whole page in C where that is exact, in Python where it is not.

Why: parsing was most of the page helper's CPU time, nearly all of it Python-level work per
record (figures: benchmarks/README.md, section "The parse step"). Here a page body is decoded by
msgspec
(typed, in C), each record re-encoded with sorted keys by msgspec (in C) for its canonical text
and fingerprint, and a page's timestamps are checked by one regular expression and converted
by msgspec in one call.

Exactness comes first: the values, the canonical text (hence the fingerprint) and the errors
must be those of ``parsing.parse_page`` with ``parse_order``/``parse_record``, so that an
unchanged record is never rewritten, even across the upgrade. So this module only handles what
it can prove to be the same, and hands anything else to the old path, whole pages at a time:

- ``decode_plain`` decodes only bodies whose every number is an integer, nested at most
  ``PLAIN_DEPTH`` deep: msgspec and Python then read the same values, and msgspec's sorted
  encoding is byte for byte ``canonical_json`` (it differs for floats: ``1e16``, ``0.00001``
  where Python writes ``1e+16``, ``1e-05``). Any other body (a float, deeper nesting, a lone
  surrogate, invalid JSON, UTF-16...) is decoded by the client's Python decoder as before;
  its pages are parsed the old way.
- ``parse_fetched`` parses a page of such a body in bulk when every record is well-formed and
  every timestamp has the common form (``2026-01-09T05:51:46.123Z``, an offset ``+05:30``); for
  anything else (a bad record, a tolerated timestamp form, an impossible date) it parses the
  page with ``parse_page``, which gives the same values, or the same error naming page, record
  and field.

A typed page (``Page.typed``, the sync's) arrives read only as far as a walk compares it
(``order_structs.LightOrder``: id, status, start, the customer as bytes) with its body. Each
order and its customer get a ``wire_fingerprint``, the hash of their bytes exactly as they are
in the body (``order_structs.order_slices``). Equal bytes decode to equal values, so a record
whose bytes are the ones the mirror last stored is unchanged without being decoded or encoded
at all; a re-sync then hashes each record once (``comparison.is_stored``). The body is decoded with
the order schema the first time one of the page's orders needs more (``_DeferredPage``), and
the canonical fingerprint decides whenever the bytes differ.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from ..client.decoding import decode_answer, why_not_json
from ..client.order_structs import (
    CustomerStruct,
    LightOrder,
    LineItemGroup,
    Money,
    OrderStruct,
    customer_ids,
    decode_orders_page,
    order_slices,
    to_records,
)
from ..client.pages import Page
from ..exceptions import InvalidResponse
from .parsing import (
    ParsedCustomer,
    ParsedOrder,
    ParsedRecord,
    parse_order,
    parse_page,
    parse_record,
)
from .record_fields import (
    CURRENCY_MAX,
    EMAIL_MAX,
    NUMBER_MAX,
    PHONE_MAX,
    TOTAL_MAX,
    TOTAL_MIN,
    checked_payment_url,
    read_contact,
    read_number,
    read_payment_url,
    read_total,
)

_ENCODE = msgspec.json.Encoder(order="sorted").encode


def canonical_bytes(record: Any) -> bytes:
    """``canonical_json(record).encode()`` for a value of a plain body (``decode_plain``)."""
    return _ENCODE(record)


def _hash(text: bytes) -> str:
    return hashlib.blake2b(text, digest_size=16).hexdigest()


class _PlainCustomer(ParsedCustomer):
    """A customer of a plain page: encoded by msgspec when first asked (the same text)."""

    __slots__ = ()

    @property
    def raw_json(self) -> str:
        if self._json is None:
            self._json = _ENCODE(self._raw).decode()
        return self._json

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = _hash(self.raw_json.encode())
        return self._fingerprint


class _DeferredCustomer(ParsedCustomer):
    """A customer of a light page (``Page.typed``), known at once by its id and its bytes'
    hash; its other fields, text and fingerprint are read from its page on first use.

    ``__getattr__`` is only called for a slot not set yet: a walk compares a customer by id and
    bytes, and needs the rest only to write it (then with the checks ``parse_customer`` makes).
    """

    __slots__ = ("_index", "_page")

    def __init__(
        self, customer_id: str, wire_fingerprint: str, page: _DeferredPage, index: int
    ) -> None:
        # ParsedCustomer's attributes, set here rather than through its __init__: one per order
        # of every page, on the helper's hot path.
        self.id = customer_id
        self._raw = None  # decoded from raw_json if asked for: the same values
        self._json = None
        self._fingerprint = None
        self.wire_fingerprint = wire_fingerprint
        self._page = page
        self._index = index

    def __getattr__(self, name: str) -> Any:
        if name in ("guest", "name", "email_address", "phone_number"):
            struct = self._page.struct(self._index)
            if struct is None:
                parsed = self._page.parsed(self._index).customer
                self.guest, self.name = parsed.guest, parsed.name
                self.email_address, self.phone_number = parsed.email_address, parsed.phone_number
                return object.__getattribute__(self, name)
            customer: CustomerStruct = struct.customer  # type: ignore[assignment]  # vouched for
            self.guest = customer.guest is True
            text = customer.name
            self.name = (text if type(text) is str else "")[:255]
            email = customer.email_address
            self.email_address = email if type(email) is str and len(email) <= EMAIL_MAX else ""
            phone = customer.phone_number
            self.phone_number = phone if type(phone) is str and len(phone) <= PHONE_MAX else ""
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _encode(self) -> None:
        struct = self._page.struct(self._index)
        if struct is None:
            parsed = self._page.parsed(self._index).customer
            self._json, self._fingerprint = parsed.raw_json, parsed.fingerprint
            return
        text = _ENCODE(struct.customer)
        self._json = text.decode()
        self._fingerprint = _hash(text)

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


def _timestamps(texts: list[str]) -> list[datetime] | None:
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
        return None  # 2026-02-30, or a date that leaves the calendar in UTC: the old path


# --- pages ---------------------------------------------------------------------------------------

_OPTIONAL_TIMES = ("completed_at", "paid_at", "canceled_at", "expires_at")


def _vouched(order_id: Any, status: Any, initiated_at: Any, customer_id: Any) -> bool:
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
    """The page's orders, or ``None`` when ``parse_page`` must decide (see the module docs)."""
    texts: list[str] = []
    for record in records:
        customer = record.get("customer")
        initiated_at: Any = record.get("initiated_at")  # a str once vouched for
        if not _vouched(
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
    moments = _timestamps(texts)
    if moments is None:
        return None
    next_moment = iter(moments).__next__
    parsed: list[ParsedOrder] = []
    for record in records:
        get: Callable[[str], Any] = record.get  # the fields were checked above
        initiated_at = next_moment()  # in the order _timestamps was given them
        completed_at = None if get("completed_at") is None else next_moment()
        paid_at = None if get("paid_at") is None else next_moment()
        canceled_at = None if get("canceled_at") is None else next_moment()
        expires_at = None if get("expires_at") is None else next_moment()
        raw_customer = get("customer")
        name = raw_customer.get("name")
        email_address, phone_number = read_contact(raw_customer)
        text = _ENCODE(record)
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
                fingerprint=_hash(text),
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


#: The fields of an order of a light page that are read for the whole page on first use
#: (``_DeferredPage.read``); its id, status, customer and wire fingerprint are read at once,
#: its fingerprint on first use, encoded for that order alone where the schema fits the page
#: (where it does not, the page is parsed the old way, whole: ``_DeferredPage.parsed``).
DEFERRED_FIELDS = frozenset(
    (
        "initiated_at",
        "completed_at",
        "paid_at",
        "canceled_at",
        "expires_at",
        "total",
        "currency",
        "number",
        "payment_url",
        "raw_json",
    )
)


class _DeferredOrder(ParsedOrder):
    """An order of a typed page, read at once only as far as the writer needs to tell whether it
    changed: its id, status, customer and wire fingerprint.

    Why: in a re-sync nearly every order is unchanged, and everything else about it is never
    used; reading it was most of the page's parsing (benchmarks/README.md, issue 22). Its other
    fields (``DEFERRED_FIELDS``) are left unset and read for the whole page the first time one
    of them is asked for: ``__getattr__`` is only called for an attribute that normal lookup did
    not find, so a field once read costs nothing more. Its canonical text and fingerprint are
    encoded on first use, for this order alone: an order whose bytes are the ones the mirror
    last stored (``wire_fingerprint``) is known unchanged without them, and without its page
    ever being decoded with the order schema.
    """

    __slots__ = ("__weakref__", "_index", "_page")

    def __init__(
        self,
        light: LightOrder,
        customer: _DeferredCustomer,
        wire_fingerprint: str,
        page: _DeferredPage,
        index: int,
    ) -> None:
        # The eager fields only; the deferred slots stay unset until the page is read.
        self.id = light.id  # vouched for by _vouched
        self.status = light.status
        self.customer = customer
        self.wire_fingerprint = wire_fingerprint
        self._raw = None  # decoded from raw_json if asked for: the same values
        self._page = page
        self._index = index

    def __getattr__(self, name: str) -> Any:
        if name in DEFERRED_FIELDS:
            self._page.read()
        elif name == "fingerprint":
            self.fingerprint = _hash(self._page.canonical_text(self._index))
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return object.__getattribute__(self, name)


class _DeferredPage:
    """One typed page: its body, decoded with the order schema the first time one of its
    orders needs more than its id, status, customer and bytes; and its orders' deferred fields,
    read together (the page's timestamps are one regular expression and one msgspec call,
    ``_timestamps``).

    A body the schema does not fit (a field it does not know, a float) is decoded and parsed
    as any other page then (``parsed``), with the same values or the same error.

    It holds its orders only weakly: each order refers to its page, and a page that referred
    back would make every page a reference cycle, freed only by the garbage collector's rare
    full collections (it grew a walk's memory by 35 MB at 100,000 orders). An order gone is
    one nobody reads.
    """

    __slots__ = ("_parsed", "_structs", "body", "done", "number", "orders", "resource")

    def __init__(self, number: int, resource: str, body: bytes) -> None:
        self.number = number
        self.resource = resource
        self.body = body
        self.orders: list[weakref.ref[_DeferredOrder]] = []
        self.done = False
        self._structs: list[OrderStruct] | None = None
        self._parsed: list[ParsedOrder] | None = None

    def _decode(self) -> list[OrderStruct] | None:
        """The page's structs, decoded on first call; ``None`` if the schema does not fit the
        page, which is then parsed as any other (``parsed``)."""
        if self._structs is None and self._parsed is None:
            envelope = decode_orders_page(self.body)
            if envelope is not None:
                self._structs = envelope.page.orders
            else:
                self._parsed = parse_body(self.body, parse_order, self.number, self.resource)
        return self._structs

    def struct(self, index: int) -> OrderStruct | None:
        """The order's struct, or ``None`` if the schema does not fit the page (``parsed``)."""
        structs = self._decode()
        return structs[index] if structs is not None else None

    def parsed(self, index: int) -> ParsedOrder:
        """The order parsed as any other page's, on a page the schema does not fit."""
        assert self._parsed is not None  # struct() said so
        return self._parsed[index]

    def canonical_text(self, index: int) -> bytes:
        """The order's canonical JSON (``canonical_json``), encoded."""
        struct = self.struct(index)
        if struct is None:
            return self.parsed(index).raw_json.encode()
        return _ENCODE(struct)

    def read(self) -> None:
        """Set every order's deferred fields, or raise the ``InvalidRecord`` that
        ``parse_page`` raises for the page (naming page, record and field)."""
        if self.done:
            return
        structs = self._decode()
        if structs is None:
            assert self._parsed is not None
            self._copy(self._parsed)
            self.done = True
            return
        texts: list[str] = []
        add = texts.append
        for struct in structs:
            add(struct.initiated_at)  # type: ignore[arg-type]  # a str: vouched for
            # The schema types them str, None or UNSET: a str is a timestamp to read.
            if type(struct.completed_at) is str:
                add(struct.completed_at)
            if type(struct.paid_at) is str:
                add(struct.paid_at)
            if type(struct.canceled_at) is str:
                add(struct.canceled_at)
            if type(struct.expires_at) is str:
                add(struct.expires_at)
        moments = _timestamps(texts)
        if moments is None:
            # A timestamp of a tolerated form, an impossible date or a bad one: ``parse_page``
            # decides, with the same values or the same error.
            records = to_records(structs)
            parsed = parse_page(
                records, parse_order, page_number=self.number, resource=self.resource
            )
            self._copy(parsed)
        else:
            self._read(structs, iter(moments).__next__)
        self.done = True

    def _read(self, structs: list[OrderStruct], next_moment: Callable[[], datetime]) -> None:
        for struct, ref in zip(structs, self.orders, strict=True):
            # Every moment is taken, in the order read() gave them, gone order or not.
            initiated_at = next_moment()
            completed_at = next_moment() if type(struct.completed_at) is str else None
            paid_at = next_moment() if type(struct.paid_at) is str else None
            canceled_at = next_moment() if type(struct.canceled_at) is str else None
            expires_at = next_moment() if type(struct.expires_at) is str else None
            order = ref()
            if order is None:
                continue
            order.initiated_at = initiated_at
            order.completed_at = completed_at
            order.paid_at = paid_at
            order.canceled_at = canceled_at
            order.expires_at = expires_at
            total_value: int | None = None
            currency = ""
            group = struct.line_item_group
            if type(group) is LineItemGroup:
                total = group.total
                if type(total) is Money:
                    value, code = total.value, total.currency
                    if type(value) is int and TOTAL_MIN <= value <= TOTAL_MAX:
                        total_value = value
                    if type(code) is str and len(code) <= CURRENCY_MAX:
                        currency = code.lower()
            order.total = total_value
            order.currency = currency
            number = struct.number
            order.number = number if type(number) is str and len(number) <= NUMBER_MAX else ""
            url = None
            invoice = struct.invoice
            if invoice:  # a struct is true, None and UNSET are false
                formats = invoice.format
                if formats:
                    web = formats.web
                    if web:
                        url = web.url
            order.payment_url = checked_payment_url(url)
            # Encoded here, struct in hand (a first sync reads every page): a second time only for
            # an order whose fingerprint was asked for first, on a page that turned out to change.
            text = _ENCODE(struct)
            order.fingerprint = _hash(text)
            order.raw_json = text.decode()

    def _copy(self, parsed: list[ParsedOrder]) -> None:
        """The deferred fields from the same page parsed another way (same values)."""
        for ref, values in zip(self.orders, parsed, strict=True):
            order = ref()
            if order is not None:
                for name in DEFERRED_FIELDS:
                    setattr(order, name, getattr(values, name))


def read_deferred(orders: list[Any]) -> None:
    """Read now the deferred fields of a page parsed with ``parse_fetched(..., deferred=True)``
    (nothing to do for any other page)."""
    if orders and type(orders[0]) is _DeferredOrder:
        orders[0]._page.read()


def _wire_hash(data: Any) -> str:
    """``wire_fingerprint``: the bytes' SHA-256, cut to 128 bits (as long as the canonical
    fingerprint). SHA-256 rather than blake2b: processors hash it in hardware (x86 SHA
    extensions, ARMv8 crypto), about a third faster for a record of a kilobyte
    (benchmarks/README.md, issue 22)."""
    return hashlib.sha256(data).digest()[:16].hex()


def _light_orders(orders: list[LightOrder], page: _DeferredPage) -> list[_DeferredOrder] | None:
    """The orders of a typed page, each with its bytes' hash and its customer's, the rest read
    from ``page`` on first use; ``None`` when a record's id, status, start or customer id is
    not of the form the bulk path vouches for (the page is then parsed at once, as before)."""
    customers = customer_ids(orders)
    if customers is None:
        return None  # an order without a customer object
    for order, customer_id in zip(orders, customers, strict=True):
        if not _vouched(order.id, order.status, order.initiated_at, customer_id):
            return None
    parsed: list[_DeferredOrder] = []
    add = parsed.append
    for index, (order, customer_id, order_bytes) in enumerate(
        zip(orders, customers, order_slices(page.body), strict=True)
    ):
        customer = _DeferredCustomer(customer_id, _wire_hash(order.customer), page, index)
        add(_DeferredOrder(order, customer, _wire_hash(order_bytes), page, index))
    page.orders = [weakref.ref(order) for order in parsed]
    return parsed


def parse_body(body: bytes, parse: Callable[[Any], Any], number: int, resource: str) -> list:
    """A typed page's records parsed from its body: the schema's structs where it fits, else
    the body decoded as any other answer (``decoding.decode_answer``) and parsed as such."""
    envelope = decode_orders_page(body)
    if envelope is not None:
        return _parse_records(to_records(envelope.page.orders), True, parse, number, resource)
    try:
        data, plain = decode_answer(body)
    except ValueError as exc:
        # What the transport says of such a body. The light reading found it well formed JSON
        # but does not look inside what it skips: text that is not UTF-8, or nesting deeper
        # than MAX_JSON_DEPTH, there. Checking every body for both would cost the fetching
        # thread 0.6 and 8.7 us an order (benchmarks/README.md), and such a record can never
        # have been stored, so it is compared, hence decoded, whenever it is on a page: here.
        raise InvalidResponse(
            f"{resource} page {number}: POST /{resource}/page answered with a body that is "
            f"not JSON ({why_not_json(exc, body)})"
        ) from None
    return _parse_records(data["page"]["orders"], plain, parse, number, resource)


def _records(records: list[dict[str, Any]]) -> list[ParsedRecord] | None:
    parsed: list[ParsedRecord] = []
    for record in records:
        record_id = record.get("id")
        if type(record_id) is not str or not 0 < len(record_id) <= 64:
            return None
        text = _ENCODE(record)
        parsed.append(ParsedRecord(record_id, record, _hash(text), text.decode()))
    return parsed


def parse_fetched(
    page: Page, parse: Callable[[Any], Any], *, resource: str, deferred: bool = False
) -> list:
    """``parse_page(page.records, parse, ...)``, in bulk for a plain page (``Page.plain``) of
    orders (``parse_order``) or other records (``parse_record``): the same values or error.

    ``deferred=True`` (the sync's walk) leaves the fields of a typed page's orders that only a
    new or changed order needs to be read on first use, for the whole page (``_DeferredOrder``;
    ``read_deferred`` reads them at once). A bad timestamp or an impossible date then raises
    its ``InvalidRecord`` when they are read; an unchanged order's are never read: its text is
    the one stored, which was read when it was stored.
    """
    if page.typed:
        assert page.body is not None  # a typed page keeps its body (Page.typed)
        if parse is parse_order:
            lazy = _DeferredPage(page.number, resource, page.body)
            parsed = _light_orders(page.records, lazy)
            if parsed is not None:
                if not deferred:
                    lazy.read()
                return parsed
        return parse_body(page.body, parse, page.number, resource)
    return _parse_records(page.records, page.plain, parse, page.number, resource)


def _parse_records(
    records: list[Any], plain: bool, parse: Callable[[Any], Any], number: int, resource: str
) -> list:
    if plain:
        fast = _orders if parse is parse_order else _records if parse is parse_record else None
        bulk = fast(records) if fast is not None else None
        if bulk is not None:
            return bulk
    return parse_page(records, parse, page_number=number, resource=resource)
