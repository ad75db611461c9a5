"""A page of a ``/page`` answer: what it holds, and the checks on what was asked and answered.

Shared by the transport (``fetch_page`` builds a ``Page``) and the walk (``paging``), so that
neither imports the other's reasons to change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..conf.table import MAX_PAGE_SIZE
from ..exceptions.wire import InvalidResponse
from .answers import Answer
from .order_structs import LightPageStruct

#: Collection property per resource (spec traversal rule 3, api-notes.md).
COLLECTIONS: dict[str, str] = {
    "orders": "orders",
    "customers": "customers",
    "balance_transactions": "transactions",
    "payouts": "payouts",
}


@dataclass(frozen=True)
class Page:
    """One page of a ``/page`` walk."""

    number: int
    #: The requested page size (not the answer's ``page.size``, which may be the count).
    size: int
    #: The records as decoded dicts; on a ``typed`` page, ``order_structs.LightOrder``s.
    records: list[Any]
    request_id: str | None = None
    #: The HTTP status of the answer (``check_orders_api`` reports it).
    status_code: int | None = None
    #: The body had no float and was decoded by msgspec (``decoding.decode_plain``): its records'
    #: canonical text can be msgspec's sorted encoding, which is then exactly ``canonical_json``.
    plain: bool = False
    #: Asked for with ``fetch_page(..., typed=True)`` (the sync) and read as
    #: ``order_structs.LightOrder``s: only what a walk compares, each customer as its bytes.
    #: The parser decodes ``body`` with the order schema when it needs more
    #: (``mirror.deferred_pages``).
    typed: bool = False
    #: A typed page's body, as the service sent it: the parser hashes each record's bytes as
    #: sent (``Order.wire_fingerprint``) and decodes it when needed. ``None`` for any other page.
    body: bytes | None = field(default=None, repr=False)
    #: When the walk sent the request for this page (its first attempt): the mirror refuses
    #: the page's answer for an order it holds from a later request (``mirror.lifecycle``).
    sent_at: datetime | None = None

    @property
    def is_last(self) -> bool:
        """Traversal rule 2 on the records' count: fewer than asked for (none included) is the
        end. ``size`` is the requested page size, whichever way the answer read ``page.size``."""
        return len(self.records) < self.size


def collection_for(resource: str) -> str:
    """The collection property of a resource's pages; unknown resources need it named."""
    try:
        return COLLECTIONS[resource]
    except KeyError:
        raise ValueError(
            f"No known collection property for resource {resource!r}; pass collection=..."
        ) from None


def is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_page_args(page_number: Any, page_size: Any) -> None:
    """Raise ``ValueError`` before anything is sent for numbers the spec rules out."""
    if not is_whole(page_number) or page_number < 1:
        raise ValueError(f"page_number must be a whole number of at least 1, not {page_number!r}")
    if not is_whole(page_size) or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ValueError(
            f"page_size must be a whole number from 1 to {MAX_PAGE_SIZE}, not {page_size!r}"
        )


def check_page_shape(
    page: dict[str, Any],
    records: list[Any],
    page_number: int,
    page_size: int,
    invalid: Callable[[str], Exception],
) -> None:
    """Refuse a page whose records or echoes contradict the request (``invalid(what)`` raises).

    The records' count is the truth the stop rule reads (rule 2: fewer than ``page_size`` ends
    the walk). ``page.size`` is read both ways the provider documents it (api-notes.md): the
    spec's echo of the requested ``page_size`` and the SDK's number of records returned; a value
    that is neither is refused. A page holding more records than asked for is refused before
    anything of it is stored: the slice is not the one asked for, and rule 2 could no longer
    tell where the walk is. A ``page.number`` other than the one asked for (a clamped number)
    would repeat records and is refused too.
    """
    count = len(records)
    if count > page_size:
        raise invalid(
            f"page {page_number} with {count} records, more than the requested page_size "
            f"{page_size}; the page is refused and nothing of it is stored"
        )
    if "number" in page and page["number"] != page_number:
        raise invalid(f"page.number {page['number']!r} for the requested {page_number}")
    if "size" in page:
        size = page["size"]
        if not is_whole(size) or size not in (page_size, count):
            raise invalid(
                f"page {page_number} with page.size {size!r}: expected the requested page_size "
                f"{page_size} or the number of records returned ({count})"
            )


def page_from(answer: Answer, path: str, collection: str, page_number: int, page_size: int) -> Page:
    """The page in ``answer``, or ``InvalidResponse`` saying how it breaks the contract."""

    def invalid(what: str) -> InvalidResponse:
        return InvalidResponse(
            f"POST {path} answered {what}",
            status_code=answer.status_code,
            request_id=answer.request_id,
        )

    if answer.typed:
        # The light decoder vouched for the envelope and that every record is an object.
        envelope: LightPageStruct = answer.data
        records: list[Any] = envelope.page.orders
        check_page_shape(envelope.echoes(), records, page_number, page_size, invalid)
    else:
        page = answer.data.get("page") if isinstance(answer.data, dict) else None
        if not isinstance(page, dict):
            raise invalid("without the 'page' envelope")
        records = page.get(collection)  # type: ignore[assignment]
        if not isinstance(records, list):
            raise invalid(f"without the '{collection}' list in 'page'")
        if not all(isinstance(r, dict) for r in records):
            raise invalid(f"with a non-object in '{collection}'")
        check_page_shape(page, records, page_number, page_size, invalid)
    return Page(
        number=page_number,
        size=page_size,
        records=records,
        request_id=answer.request_id,
        status_code=answer.status_code,
        plain=answer.plain,
        typed=answer.typed,
        body=answer.body,
    )
