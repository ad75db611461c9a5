"""The registry itself: what a resource is (``Resource``) and the table of registered ones.
The resource modules import only this, so the package (which registers them) has no import
cycle."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import models

from ..result import MirrorResult
from ..searched import SearchedMirror

#: What a resource name may be: it becomes part of the URL path (``/<resource>/page``), and it
#: is stored in columns of this length (``SyncRun``, ``SyncLease``, ``RemoteRecord``).
RESOURCE_NAME = re.compile(r"[a-z0-9_]{1,64}")


def _no_customers(records: Sequence[Any]) -> set[str]:
    return set()


@dataclass(frozen=True)
class ReadApart:
    """How a first sync reads a resource's pages in a helper process (``sync.parse_process``).

    ``reader``: ``"module:function"``, called in the helper as ``(records, page_number,
    resource)`` with each record's bytes, answering plain values; its module must import
    without Django's settings or app registry. ``rebuild(answer, page_number, resource,
    count)``: in the sync's process, the page that answer is (``parsing.LenientPage``), its
    records read in full.
    """

    reader: str
    rebuild: Callable[[Any, int, str, int], Any]


@dataclass(frozen=True)
class Resource:
    """One upstream resource, as the walk and the mirror handle it.

    ``parse(record, plain=)`` reads one record as decoded, ``reader`` a walk's page;
    ``store(records, now=, sent_at=, known_customers=)`` writes a page of parsed records in the
    caller's transaction. The optional hooks are the walk's shortcuts for a resource that has
    them (orders): records read in full only when needed (``complete``, before a page is
    written), a page that changes nothing counted without a transaction (``quiet``), and a
    lifecycle whose open records are refreshed by lookup (``is_open``). ``look_up``,
    ``store_lookup``, ``set_aside``: how its records are read by id and written, one a
    transaction (``store_lookups``: a batch in one, for a resource that has it).
    ``refresh_refunds``: its walk ends with the refresh of the refunds still moving (pending,
    processing), which no webhook reports: orders carry refunds, and refunds are that.
    """

    name: str
    collection: str
    model: type[models.Model]
    parse: Callable[..., Any]
    store: Callable[..., MirrorResult]
    #: How a walk's page of it is read, if not record by record (``parsing.read_page``).
    reader: Callable[..., Any] | None = None
    complete: Callable[..., tuple[list, list]] | None = None
    #: How a first sync reads its pages in a helper process, records in full (``complete``).
    read_apart: ReadApart | None = None
    quiet: Callable[[list, set[str]], MirrorResult | None] | None = None
    is_open: Callable[[Any], bool] | None = None
    refresh_refunds: bool = False
    #: What one record and several are called in messages.
    noun: tuple[str, str] = ("record", "records")
    #: ``(ids, *, heartbeat=, gate=)``: the lookups, several in flight (``client.lookups``);
    #: each has ``record_id`` and ``record`` (``None``: unknown to the service).
    look_up: Callable[..., Iterator[Any]] | None = None
    #: ``(lookup, *, within=, origin=)``: one lookup written in its own transaction, ``within``
    #: inside it; ``None`` for a record the service does not know.
    store_lookup: Callable[..., MirrorResult | None] | None = None
    #: ``(lookups, *, within=, origin=)``: several lookups written in one transaction.
    store_lookups: Callable[..., MirrorResult] | None = None
    #: ``(record_id, *, within=)``: the transaction of a lookup set aside, nothing stored
    #: (an order goes to the back of the refresh queue).
    set_aside: Callable[..., None] | None = None
    #: The ids of the customers a page's records embed (rolled back with the page).
    customers: Callable[[Sequence[Any]], set[str]] = _no_customers
    #: The search index's resource type (``order``, ``customer``) of ``/<name>/search``, and
    #: what the mirror keeps of it (``searched``): with both, ``sync_orders --backfill`` reads
    #: the resource's whole history (``sync.backfill``); ``None``: no search index.
    search_type: str | None = None
    searched: SearchedMirror | None = None
    #: Whether each sync of the resource also reads the change feed of its search index
    #: after the walk (``sync.feed``).
    change_feed: bool = False

    @property
    def backfilled(self) -> bool:
        """Whether ``sync_orders --backfill`` can read its whole history through search."""
        return (
            self.search_type is not None
            and self.searched is not None
            and self.look_up is not None
            and self.store_lookup is not None
        )

    @property
    def refreshed(self) -> bool:
        """Whether its open records are refreshed by lookup after a walk."""
        return self.is_open is not None


RESOURCES: dict[str, Resource] = {}


def register(resource: Resource) -> Resource:
    """Add ``resource`` to the registry (replacing one of the same name)."""
    RESOURCES[resource.name] = resource
    return resource


class _Collections(Mapping[str, str]):
    """The collection property of each registered resource's pages, read live."""

    def __getitem__(self, name: str) -> str:
        return RESOURCES[name].collection

    def __iter__(self) -> Iterator[str]:
        return iter(RESOURCES)

    def __len__(self) -> int:
        return len(RESOURCES)

    def __repr__(self) -> str:
        return repr(dict(self))


#: Collection property per registered resource (spec traversal rule 3, api-notes.md).
COLLECTIONS: Mapping[str, str] = _Collections()
