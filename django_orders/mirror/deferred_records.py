"""The orders and customers of a light page (``deferred_pages.DeferredPage``): known at once
only by what a walk compares, the rest read from their page the first time it is asked for.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..client.order_structs import CustomerStruct, LightOrder, OrderStruct
from .parsed import ParsedCustomer, ParsedOrder, encode_sorted, hash_text
from .record_fields import EMAIL_MAX, PHONE_MAX


class PageReader(Protocol):
    """What a deferred record reads of its page (``DeferredPage``)."""

    @property
    def carries_refunds(self) -> bool: ...

    def struct(self, index: int) -> OrderStruct | None: ...

    def parsed(self, index: int) -> ParsedOrder: ...

    def canonical_text(self, index: int) -> bytes: ...

    def read(self) -> None: ...


class DeferredCustomer(ParsedCustomer):
    """A customer of a light page (``Page.typed``), known at once by its id and its bytes'
    hash; its other fields, text and fingerprint are read from its page on first use.

    ``__getattr__`` is only called for a slot not set yet: a walk compares a customer by id and
    bytes, and needs the rest only to write it (then with the checks ``parse_customer`` makes).
    """

    __slots__ = ("_index", "_page")

    def __init__(
        self, customer_id: str, wire_fingerprint: str, page: PageReader, index: int
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
        text = encode_sorted(struct.customer)
        self._json = text.decode()
        self._fingerprint = hash_text(text)

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


#: The fields of an order of a light page that are read for the whole page on first use
#: (``DeferredPage.read``); its id, status, customer and wire fingerprint are read at once,
#: its fingerprint on first use, encoded for that order alone where the schema fits the page
#: (where it does not, the page is parsed whole: ``DeferredPage.parsed``).
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


class DeferredOrder(ParsedOrder):
    """An order of a typed page, read at once only as far as the writer needs to tell whether it
    changed: its id, status, customer and wire fingerprint.

    Why: in a re-sync nearly every order is unchanged, and everything else about it is never
    used; reading it was most of the page's parsing (benchmarks/README.md). Its other
    fields (``DEFERRED_FIELDS``) are left unset and read for the whole page the first time one
    of them is asked for: ``__getattr__`` is only called for an attribute that normal lookup did
    not find, so a field once read costs nothing more. Its canonical text and fingerprint are
    encoded on first use, for this order alone: an order whose bytes are the ones the mirror
    last stored (``wire_fingerprint``) is known unchanged without them, and without its page
    ever being decoded with the order schema.
    """

    __slots__ = ("__weakref__", "_index", "_page", "refunds_bytes")

    def __init__(
        self,
        light: LightOrder,
        customer: DeferredCustomer,
        wire_fingerprint: str,
        page: PageReader,
        index: int,
    ) -> None:
        # The eager fields only; the deferred slots stay unset until the page is read.
        self.id = light.id  # vouched for by vouched
        self.status = light.status
        self.customer = customer
        self.wire_fingerprint = wire_fingerprint
        #: The ``refunds`` it carries, as sent (empty when absent): ``carried_refunds``.
        self.refunds_bytes = light.refunds
        self._raw = None  # decoded from raw_json if asked for: the same values
        self._page = page
        self._index = index

    def __getattr__(self, name: str) -> Any:
        if name in DEFERRED_FIELDS:
            self._page.read()
        elif name == "fingerprint":
            self.fingerprint = hash_text(self._page.canonical_text(self._index))
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return object.__getattribute__(self, name)
