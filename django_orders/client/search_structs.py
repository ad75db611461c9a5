"""A ``/…/search`` answer as typed msgspec structs (the provider SDK's ``search.Page``).

Only what the change feed and the backfill read is typed; other fields the service sends are
ignored (search answers carry facets and display fields the mirror has no use for). A type
the contract does not allow (a string where a count belongs, a timestamp without an offset)
makes the answer an ``InvalidResponse``, never a guess.
"""

from __future__ import annotations

from datetime import datetime

import msgspec
from msgspec import Struct

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
