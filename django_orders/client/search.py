"""Search: the calls of the provider's index (``/orders/search``, ``/customers/search``,
``/payouts/search``), mixed into ``OrdersClient``, and their answer as typed msgspec structs
(``SearchPage``, the provider SDK's ``search.Page``). The index is sorted by ``updated_at`` and
continued with an opaque cursor.

Only what the change feed and the backfill read is typed; other fields the service sends are
ignored (search answers carry facets and display fields the mirror has no use for). A type
the contract does not allow (a string where a count belongs, a timestamp without an offset)
makes the answer an ``InvalidResponse``, never a guess.

A search is a read: retried like a page read (429 with ``Retry-After`` through the client's
``RateGate`` when it shares one, 5xx, network errors, answers that break the contract). A
cursor the service refuses as expired is a ``RequestRejected`` whose ``is_cursor_expired`` is
true: the caller searches again without it.

A read that follows cursors is kept finite by a ``SearchTrail``: an answer that leads nowhere
(a cursor already followed, ``has_more`` with nothing not already seen, more answers than an
exact total allows) is an ``InvalidResponse`` naming the cursor, so a provider that repeats
itself ends the read instead of holding the sync (and its lease) for ever.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import Struct

from ..conf.table import MAX_PAGE_SIZE
from ..exceptions.wire import InvalidResponse

__all__ = [
    "FRESHNESS_STATES",
    "Freshness",
    "ResourceFreshness",
    "SearchPage",
    "SearchResult",
    "SearchTotal",
    "search_page_from",
]


#: The provider's freshness states (the SDK's ``search.FreshnessState``); any other string is
#: kept and treated like ``unknown``.
FRESHNESS_STATES = ("current", "delayed", "partial", "unknown", "unavailable")


class _Struct(Struct, gc=False):
    pass


class ResourceReference(_Struct):
    type: str
    id: str


class Money(_Struct):
    currency: str
    value: int


class SearchResult(_Struct):
    """One projection: enough to tell whether the mirror's copy is behind."""

    resource: ResourceReference
    updated_at: datetime
    status: str | None = None
    amount: Money | None = None
    customer_name: str | None = None

    @property
    def id(self) -> str:
        return self.resource.id


class SearchTotal(_Struct):
    value: int
    #: ``exact`` or ``lower_bound`` ("at least").
    relation: str

    @property
    def exact(self) -> bool:
        return self.relation == "exact"


class ResourceFreshness(_Struct):
    resource_type: str
    state: str
    observed_at: datetime | None = None
    last_indexed_at: datetime | None = None


class Freshness(_Struct):
    state: str
    observed_at: datetime | None = None
    resources: list[ResourceFreshness] | None = None

    def of(self, resource_type: str) -> ResourceFreshness:
        """The freshness of one resource: its entry in ``resources[]``, else the overall one
        (without a ``last_indexed_at``, which only a resource's entry gives)."""
        for entry in self.resources or ():
            if entry.resource_type == resource_type:
                return entry
        return ResourceFreshness(
            resource_type=resource_type, state=self.state, observed_at=self.observed_at
        )


class SearchPage(_Struct):
    """One search answer: its projections, whether more follow and from where, the total and
    how fresh the index says it is."""

    results: list[SearchResult]
    has_more: bool
    freshness: Freshness
    next_cursor: str | None = None
    total: SearchTotal | None = None


class _Envelope(_Struct):
    search: SearchPage


def search_page_from(data: object) -> SearchPage:
    """The search answer in ``data`` (``{"search": {...}}``); ``ValueError`` saying why not."""
    try:
        page = msgspec.convert(data, _Envelope).search
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
    moments = [r.updated_at for r in page.results]
    if any(moment.tzinfo is None for moment in moments):
        raise ValueError("an updated_at without a UTC offset")
    if page.has_more and not page.next_cursor:
        raise ValueError("has_more without a next_cursor")
    return page


if TYPE_CHECKING:
    from .reading import Answer

#: The resources with a search endpoint (``/<resource>/search``).
SEARCHED = ("orders", "customers", "payouts")

#: Answers past an exact total's ``total / page_size`` a read may still take before it ends as
#: an index that does not end: records indexed late (a delayed index catching up) shift a
#: read, so a tenth more, and at least this many.
EXTRA_ANSWERS = 3

#: The longest part of a cursor an error message quotes (cursors are opaque and can be long).
_CURSOR_SHOWN = 60


def _shown(cursor: str) -> str:
    return repr(cursor if len(cursor) <= _CURSOR_SHOWN else cursor[:_CURSOR_SHOWN] + "...")


class SearchTrail:
    """One read of a search index, answer after answer, kept finite.

    ``follow`` raises ``InvalidResponse`` when an answer with ``has_more`` gives a cursor this
    read already followed, brings no record it has not already seen, or is one answer too many
    for the exact total the read's first answer gave (``EXTRA_ANSWERS``). "Already seen" is
    read from the sort, so memory stays flat over a backfill of millions: a record is new when
    it lies past the furthest ``updated_at`` the read has reached (or on it, with an id not yet
    had there); an answer whose records all lie at or before that point repeats the read.

    A search without a cursor begins the read again (after an expired cursor): it forgets
    what it had seen. A trail whose first search carries a cursor (a resumed backfill) starts
    from there.
    """

    def __init__(self, path: str, page_size: int, *, descending: bool = True) -> None:
        self.path = path
        self.page_size = page_size
        self.descending = descending
        self._begin()

    def _begin(self) -> None:
        self._followed: set[str] = set()
        self._furthest: datetime | None = None
        self._there: set[str] = set()  # the ids seen at ``_furthest``
        self._answers = 0
        self._budget: int | None = None

    def follow(self, cursor: str | None, page: SearchPage, request_id: str | None = None) -> None:
        """Take one answer (to the search sent with ``cursor``); ``InvalidResponse`` when
        following its ``next_cursor`` would not make the read any progress."""
        if cursor is None:
            self._begin()
        else:
            self._followed.add(cursor)
        self._answers += 1
        if self._budget is None and page.total is not None and page.total.exact:
            answers = -(-page.total.value // self.page_size)
            self._budget = answers + max(EXTRA_ANSWERS, answers // 10)
        progressed = self._advance(page)
        if not page.has_more:
            return
        assert page.next_cursor  # search_page_from refuses has_more without one
        why = None
        if page.next_cursor in self._followed:
            why = f"gave the cursor {_shown(page.next_cursor)} again, already followed in this read"
        elif not progressed:
            why = (
                f"answered the cursor {_shown(cursor)} with has_more and no record not "
                "already seen in this read"
                if cursor is not None
                else "answered has_more with no record"
            ) + f" (next cursor {_shown(page.next_cursor)})"
        elif self._budget is not None and self._answers >= self._budget:
            why = (
                f"had more after {self._answers} answers of {self.page_size} for an exact total "
                f"of {page.total.value if page.total else '?'} (at the cursor "
                f"{_shown(page.next_cursor)})"
            )
        if why is not None:
            raise InvalidResponse(
                f"POST {self.path} {why}: the read would never end",
                status_code=200,
                request_id=request_id,
            )

    def _advance(self, page: SearchPage) -> bool:
        """Move the furthest point past this answer's records; True if any lay beyond it."""
        progressed = False
        for result in page.results:
            moment, furthest = result.updated_at, self._furthest
            beyond = furthest is None or (
                moment < furthest if self.descending else moment > furthest
            )
            if beyond:
                self._furthest, self._there = moment, {result.id}
                progressed = True
            elif moment == furthest and result.id not in self._there:
                self._there.add(result.id)
                progressed = True
        return progressed


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
        trail: SearchTrail | None = None,
    ) -> SearchPage:
        """One ``POST /<resource>/search`` sorted by ``updated_at``; ``cursor`` continues the
        search whose previous answer gave it (with the same sort and filters). ``trail``: the
        read this answer belongs to (``SearchTrail``), which refuses an answer that leads
        nowhere as an ``InvalidResponse``."""
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

        answered: list[str | None] = []  # the request id, for an error the trail raises

        def read(answer: Answer) -> SearchPage:
            answered[:] = [answer.request_id]
            try:
                return search_page_from(answer.data)
            except ValueError as exc:
                raise InvalidResponse(
                    f"POST {path} answered a search that breaks the contract: {exc}"[:500],
                    status_code=answer.status_code,
                    request_id=answer.request_id,
                ) from None

        page: SearchPage = self._call(
            path, json.dumps(body), read, retry_invalid=True, retries=retries
        )
        if trail is not None:
            trail.follow(cursor, page, request_id=answered[0] if answered else None)
        return page
