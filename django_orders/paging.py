"""The ``/page`` traversal of api-spec.md (rules 1-3) plus the provider's page window.

Kept apart from the HTTP code in ``client.py``: this module decides *which* page to ask for
next and when a walk is over; the client decides how to ask. ``client`` re-exports every name,
so ``from django_orders.client import PageWalk`` keeps working.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .conf import MAX_PAGE_SIZE
from .exceptions import RequestRejected

if TYPE_CHECKING:
    from .client import OrdersClient

logger = logging.getLogger("django_orders.paging")

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
    records: list[dict[str, Any]]
    request_id: str | None = None
    #: The HTTP status of the answer (``check_orders_api`` reports it).
    status_code: int | None = None
    #: The body had no float and was decoded by msgspec (``page_parsing``): its records'
    #: canonical text can be msgspec's sorted encoding, which is then exactly ``canonical_json``.
    plain: bool = False

    @property
    def is_last(self) -> bool:
        """Traversal rule 2 on the records' count: fewer than asked for (none included) is the
        end. ``size`` is the requested page size, whichever way the answer read ``page.size``."""
        return len(self.records) < self.size


@dataclass
class PageWalk:
    """An iterable walk over a ``/page`` endpoint following the spec's traversal rules.

    After iteration ``end_reason`` says why the walk stopped:

    - ``"last_page"``: a page shorter than the page size (rule 2): everything was seen;
    - ``"max_pages"``: the caller's ``max_pages`` was reached;
    - ``"page_window"``: the provider's page window ended the walk, either at
      ``MAX_PAGE_NUMBER`` or at a 400 that rejected a page number past it. Older records are
      unreachable by paging, which is not a failure.

    It stays ``None`` while the walk runs and when an error ended it. Iterating again starts a
    new walk from page 1.
    """

    client: OrdersClient
    resource: str
    collection: str
    page_size: int
    max_pages: int | None = None
    max_page_number: int | None = None
    end_reason: str | None = field(default=None, init=False)
    pages_read: int = field(default=0, init=False)

    def __iter__(self) -> Iterator[Page]:
        self.end_reason = None
        self.pages_read = 0
        number = 1
        while True:
            if self.max_pages is not None and self.pages_read >= self.max_pages:
                self.end_reason = "max_pages"
                return
            if self.max_page_number is not None and number > self.max_page_number:
                self.end_reason = "page_window"
                return
            try:
                page = self.client.fetch_page(
                    self.resource, number, self.page_size, collection=self.collection
                )
            except RequestRejected as exc:
                # On page 1 a 400 means the request itself is wrong: that must surface.
                if number > 1 and exc.is_page_out_of_window:
                    logger.info(
                        "%s: page %d is past the provider's page window; walk ends there",
                        self.resource,
                        number,
                    )
                    self.end_reason = "page_window"
                    return
                raise
            self.pages_read += 1
            yield page
            if page.is_last:
                self.end_reason = "last_page"
                return
            number += 1


def collection_for(resource: str) -> str:
    """The collection property of a resource's pages; unknown resources need it named."""
    try:
        return COLLECTIONS[resource]
    except KeyError:
        raise ValueError(
            f"No known collection property for resource {resource!r}; pass collection=..."
        ) from None


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_page_args(page_number: Any, page_size: Any) -> None:
    """Raise ``ValueError`` before anything is sent for numbers the spec rules out."""
    if not _is_whole(page_number) or page_number < 1:
        raise ValueError(f"page_number must be a whole number of at least 1, not {page_number!r}")
    if not _is_whole(page_size) or not 1 <= page_size <= MAX_PAGE_SIZE:
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
        if not _is_whole(size) or size not in (page_size, count):
            raise invalid(
                f"page {page_number} with page.size {size!r}: expected the requested page_size "
                f"{page_size} or the number of records returned ({count})"
            )


def check_max_pages(max_pages: Any) -> None:
    if max_pages is not None and (not _is_whole(max_pages) or max_pages < 1):
        raise ValueError(f"max_pages must be a whole number of at least 1, not {max_pages!r}")
