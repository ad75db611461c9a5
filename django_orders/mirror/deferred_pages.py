"""The light path of ``page_parsing``: a typed page (``Page.typed``, the sync's) whose orders
are known at once only by what a walk compares (id, status, customer, the hash of their bytes),
the rest read for the whole page the first time one of its orders needs it.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

import msgspec

from ..client.order_structs import (
    LightOrder,
    LineItemGroup,
    Money,
    OrderStruct,
    customer_ids,
    decode_orders_page,
    order_slices,
    to_records,
)
from ..exceptions.wire import InvalidRecord
from .bulk_pages import (
    body_records,
    encode_sorted,
    hash_text,
    page_timestamps,
    parse_body,
    vouched,
)
from .deferred_records import DEFERRED_FIELDS, DeferredCustomer, DeferredOrder
from .parsing import (
    LenientPage,
    ParsedOrder,
    parse_leniently,
    parse_order,
    parse_page,
)
from .record_fields import (
    CURRENCY_MAX,
    NUMBER_MAX,
    TOTAL_MAX,
    TOTAL_MIN,
    checked_payment_url,
)


class DeferredPage:
    """One typed page: its body, decoded with the order schema the first time one of its
    orders needs more than its id, status, customer and bytes; and its orders' deferred fields,
    read together (the page's timestamps are one regular expression and one msgspec call,
    ``page_timestamps``).

    A body the schema does not fit (a field it does not know, a float) is decoded and parsed
    as any other page then (``parsed``), with the same values or the same error.

    It holds its orders only weakly: each order refers to its page, and a page that referred
    back would make every page a reference cycle, freed only by the garbage collector's rare
    full collections (it grew a walk's memory by 35 MB at 100,000 orders). An order gone is
    one nobody reads.
    """

    __slots__ = (
        "_parsed",
        "_structs",
        "body",
        "carries_refunds",
        "done",
        "number",
        "orders",
        "resource",
    )

    def __init__(self, number: int, resource: str, body: bytes) -> None:
        self.number = number
        self.resource = resource
        self.body = body
        self.orders: list[weakref.ref[DeferredOrder]] = []
        self.done = False
        #: Whether any of its orders has a ``refunds`` key (``light_orders`` tells).
        self.carries_refunds = True
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
        return encode_sorted(struct)

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
        moments = page_timestamps(texts)
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
            text = encode_sorted(struct)
            order.fingerprint = hash_text(text)
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
    if orders and type(orders[0]) is DeferredOrder:
        orders[0]._page.read()


def may_carry_refunds(orders: Sequence[Any]) -> bool:
    """False when ``orders`` (of one page, as a walk stores them) are of a light page none of
    whose orders has a ``refunds`` key: the light reading told (``light_orders``), so such a
    page costs nothing more. True for any other page."""
    first = orders[0] if orders else None
    return type(first) is not DeferredOrder or first._page.carries_refunds


def carried_refunds(order: ParsedOrder) -> Any:
    """The ``refunds`` an order's record carries (``None`` when absent or null): an order of a
    light page from the bytes its light reading kept (most have none: nothing to decode), any
    other from its decoded record. ``InvalidRecord`` for bytes that are not JSON."""
    if type(order) is DeferredOrder:
        carried = order.refunds_bytes
        if not carried:
            return None
        try:
            return msgspec.json.decode(carried)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise InvalidRecord(f"order {order.id}: refunds are not JSON") from None
    return order.raw.get("refunds")


def reparse_deferred(orders: list[Any]) -> LenientPage:
    """The page of ``orders`` (parsed with ``deferred=True``), whose deferred read raised
    ``InvalidRecord``, parsed record by record with its malformed records set aside."""
    page: DeferredPage = orders[0]._page
    return parse_leniently(
        body_records(page.body), parse_order, page_number=page.number, resource=page.resource
    )


def _wire_hash(data: Any) -> str:
    """``wire_fingerprint``: the bytes' SHA-256, cut to 128 bits (as long as the canonical
    fingerprint). SHA-256 rather than blake2b: processors hash it in hardware (x86 SHA
    extensions, ARMv8 crypto), faster for a record of a kilobyte (figures:
    benchmarks/README.md)."""
    return hashlib.sha256(data).digest()[:16].hex()


_REFUNDS = attrgetter("refunds")


def light_orders(orders: list[LightOrder], page: DeferredPage) -> list[DeferredOrder] | None:
    """The orders of a typed page, each with its bytes' hash and its customer's, the rest read
    from ``page`` on first use; ``None`` when a record's id, status, start or customer id is
    not of the form the bulk path vouches for (the page is then parsed at once)."""
    customers = customer_ids(orders)
    if customers is None:
        return None  # an order without a customer object
    for order, customer_id in zip(orders, customers, strict=True):
        if not vouched(order.id, order.status, order.initiated_at, customer_id):
            return None
    parsed: list[DeferredOrder] = []
    add = parsed.append
    for index, (order, customer_id, order_bytes) in enumerate(
        zip(orders, customers, order_slices(page.body), strict=True)
    ):
        customer = DeferredCustomer(customer_id, _wire_hash(order.customer), page, index)
        add(DeferredOrder(order, customer, _wire_hash(order_bytes), page, index))
    page.orders = [weakref.ref(order) for order in parsed]
    # On the helper thread, in C: the writer then skips a page without refunds at once.
    page.carries_refunds = any(map(_REFUNDS, orders))
    return parsed
