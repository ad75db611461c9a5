"""The search calls of the transport (``/orders/search``, ``/customers/search``), mixed into
``OrdersClient``: the provider's search index, sorted by ``updated_at``, continued with an
opaque cursor. Answers are read as ``search_structs.SearchPage``.

A search is a read: retried like a page read (429 with ``Retry-After`` through the client's
``RateGate`` when it shares one, 5xx, network errors, answers that break the contract). A
cursor the service refuses as expired is a ``RequestRejected`` whose ``is_cursor_expired`` is
true: the caller searches again without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..conf.table import MAX_PAGE_SIZE
from ..exceptions.wire import InvalidResponse
from .search_structs import SearchPage, search_page_from

if TYPE_CHECKING:
    from .answers import Answer

#: The resources with a search endpoint (``/<resource>/search``).
SEARCHED = ("orders", "customers")


class SearchCalls:
    """The search operation; ``OrdersClient`` provides ``_call``."""

    _call: Callable[..., Any]  # OrdersClient's

    def search(
        self,
        resource: str,
        *,
        page_size: int,
        descending: bool = True,
        cursor: str | None = None,
        filters: dict[str, list[str]] | None = None,
        retries: int | None = None,
    ) -> SearchPage:
        """One ``POST /<resource>/search`` sorted by ``updated_at``; ``cursor`` continues the
        search whose previous answer gave it (with the same sort and filters)."""
        if resource not in SEARCHED:
            raise ValueError(f"resource must be one of {', '.join(SEARCHED)}, not {resource!r}")
        if isinstance(page_size, bool) or not isinstance(page_size, int):
            raise ValueError(f"page_size must be a whole number, not {page_size!r}")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be from 1 to {MAX_PAGE_SIZE}, not {page_size}")
        if cursor is not None and (not isinstance(cursor, str) or not cursor):
            raise ValueError("cursor must be the next_cursor string of the previous answer")
        body: dict[str, Any] = {
            "sort": {"field": "updated_at", "direction": "desc" if descending else "asc"},
            "page_size": page_size,
        }
        if filters:
            body["filters"] = [
                {"field": name, "operator": "eq" if len(values) == 1 else "in", "values": values}
                for name, values in filters.items()
            ]
        if cursor is not None:
            body["cursor"] = cursor
        path = f"/{resource}/search"

        def read(answer: Answer) -> SearchPage:
            try:
                return search_page_from(answer.data)
            except ValueError as exc:
                raise InvalidResponse(
                    f"POST {path} answered a search that breaks the contract: {exc}"[:500],
                    status_code=answer.status_code,
                    request_id=answer.request_id,
                ) from None

        return self._call(path, json.dumps(body), read, retry_invalid=True, retries=retries)
