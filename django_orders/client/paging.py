"""Walking ``/orders/page``: the traversal of api-spec.md (rules 1-3) plus the provider's page
window, and ``check_api``, the smallest read there is.

This module decides *which* page to ask for next and when a walk is over; the transport
(``OrdersClient.fetch_page``) decides how to ask. It imports the transport, never the reverse.

``check_api``: one real, read-only request that proves the key and the base URL work, for
``manage.py check_orders_api`` after a deploy or a key rotation (api-spec.md: "deployed,
verified, and the old key retired") and for a project's own health check. It asks
``/orders/page`` for page 1 with page size 1 and reports what happened instead of raising: a
check that fails is an answer, not an accident.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Final, Literal

from ..conf import orders_settings
from ..exceptions.wire import OrdersError, RequestRejected
from .pages import Page, check_page_args, collection_for, is_whole
from .transport import OrdersClient, get_client

logger = logging.getLogger("django_orders.paging")


class _Default(Enum):
    CLIENT = "the client's"


#: ``iter_pages(max_page_number=...)`` left out: the client's ``max_page_number``.
CLIENT_WINDOW: Final = _Default.CLIENT


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
    #: Ask for each record as its bytes (``fetch_page(raw=True)``): the sync does, and its
    #: mirror decodes them (``Page.records``).
    raw: bool = False
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
            sent_at = datetime.now(UTC)
            try:
                page = self.client.fetch_page(
                    self.resource,
                    number,
                    self.page_size,
                    collection=self.collection,
                    raw=self.raw,
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
            yield replace(page, sent_at=sent_at)
            if page.is_last:
                self.end_reason = "last_page"
                return
            number += 1


def iter_pages(
    client: OrdersClient,
    resource: str,
    collection: str | None = None,
    page_size: int | None = None,
    *,
    max_pages: int | None = None,
    max_page_number: int | Literal[_Default.CLIENT] | None = CLIENT_WINDOW,
) -> PageWalk:
    """Walk ``/<resource>/page`` from page 1 with a constant page size (traversal rules 1-3).

    Stops at the first page shorter than ``page_size``, at ``max_pages``, or at the page
    window (``max_page_number``, by default the client's, from ``MAX_PAGE_NUMBER``; or a 400
    past it). Deduplication is the caller's job (rule 4): records created during a walk shift
    later pages.
    """
    page_size = orders_settings.PAGE_SIZE if page_size is None else page_size
    check_page_args(1, page_size)
    check_max_pages(max_pages)
    window = client.max_page_number if max_page_number is CLIENT_WINDOW else max_page_number
    if window is not None and (not is_whole(window) or window < 1):
        raise ValueError(
            f"max_page_number must be a whole number of at least 1 or None, not {window!r}"
        )
    return PageWalk(
        client=client,
        resource=resource,
        collection=collection or collection_for(resource),
        page_size=page_size,
        max_pages=max_pages,
        max_page_number=window,
    )


def check_max_pages(max_pages: Any) -> None:
    if max_pages is not None and (not is_whole(max_pages) or max_pages < 1):
        raise ValueError(f"max_pages must be a whole number of at least 1, not {max_pages!r}")


@dataclass(frozen=True)
class ApiCheck:
    """What ``check_api`` saw. ``error`` is the ``OrdersError`` the request ended with, if any;
    none of the fields holds the key."""

    base_url: str
    latency_ms: float
    status_code: int | None = None
    request_id: str | None = None
    record_returned: bool = False
    error: OrdersError | None = None
    #: The orders search index's freshness (``current``, ``delayed``...), as the change feed
    #: reads it, and its ``last_indexed_at`` if given; ``search_error``: why it could not be read.
    search_freshness: str | None = None
    search_last_indexed_at: datetime | None = None
    search_error: OrdersError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def check_api() -> ApiCheck:
    """Read page 1 of ``/orders/page`` with page size 1, once, with the settings' key; then,
    when that worked, one result of ``/orders/search`` for the index's freshness.

    No retries: this verifies a deploy, and a retry loop would hide a flaky network and make a
    failing check slow to say so. Settings errors (no key, a bad URL) are for
    ``django_orders.checks.check_settings`` to report first; here they raise as from the client.
    """
    client = get_client()
    started = time.monotonic()
    try:
        page = client.fetch_page("orders", 1, 1, retries=0)
    except OrdersError as exc:
        return ApiCheck(client.base_url, _since(started), error=exc)
    latency = _since(started)
    freshness, indexed, search_error = None, None, None
    try:
        # One result, once: the key is proven by the page; this says whether the change feed
        # can trust the index.
        fresh = client.search("orders", page_size=1, retries=0).freshness.of("order")
        freshness, indexed = fresh.state, fresh.last_indexed_at
    except OrdersError as exc:
        search_error = exc
    return ApiCheck(
        client.base_url,
        latency,
        status_code=page.status_code,
        request_id=page.request_id,
        record_returned=bool(page.records),
        search_freshness=freshness,
        search_last_indexed_at=indexed,
        search_error=search_error,
    )


def _since(started: float) -> float:
    return (time.monotonic() - started) * 1000
