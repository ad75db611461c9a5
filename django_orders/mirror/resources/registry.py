"""The registry of the mirror's resources: what a resource is (``Resource``, the base class of
each resource's own), the table of registered ones, and what the mirror keeps of a resource
with a search index (``SearchedMirror``). The resource modules import only this, so the package
(which registers them) has no import cycle.

Each searched resource (``Resource.searched``) says where its records are, the last search
``updated_at`` the mirror settled of each (``search_updated_at``: a newer projection means the
record changed upstream) and whether a stored record is as a projection shows it; how one is
looked up and written is the resource's (``Resource.look_up``). Orders are rows of ``Order``;
customers raw rows of ``RemoteRecord``. ``sync.feed.decide`` reads only this, never a model by
name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections, models
from django.db.models import Q

from ...client.search import SearchResult
from ...db import app_database
from ..result import MirrorResult, Within
from ..upsert import column_of


@dataclass(frozen=True)
class SearchedMirror:
    """The mirror's side of one resource's search index."""

    model: type[models.Model]
    #: The field that holds the search result's id (``id``; ``remote_id`` for raw records).
    key: str
    #: Whether the mirror holds a record as its projection shows it (orders: status and
    #: amount), given the ``compared`` fields' values: held so, the backfill settles it
    #: without a lookup.
    same: Callable[[SearchResult, tuple[Any, ...]], bool]
    compared: tuple[str, ...]
    #: What selects the resource's rows in ``model`` (``{"resource": "customers"}``).
    scope: Mapping[str, str] = field(default_factory=dict)

    def rows(self) -> models.QuerySet[Any]:
        """The resource's rows, on the database the mirror writes to."""
        return self.model._default_manager.using(app_database()).filter(**self.scope)

    def held(self, ids: Iterable[str]) -> dict[str, tuple[datetime | None, tuple[Any, ...]]]:
        """Of ``ids``, those the mirror holds: their settled ``updated_at`` and compared fields
        (one query)."""
        found = self.rows().filter(**{f"{self.key}__in": set(ids)})
        return {
            row[0]: (row[1], tuple(row[2:]))
            for row in found.values_list(self.key, "search_updated_at", *self.compared)
        }

    def _newer(self, record_id: str, moment: datetime) -> Q:
        unsettled = Q(search_updated_at__isnull=True) | Q(search_updated_at__lt=moment)
        return Q(**{self.key: record_id}) & unsettled

    def settle(self, moments: Mapping[str, datetime], *, lock_first: bool = False) -> None:
        """Record that the mirror holds each record as of its projection's moment (its
        ``search_updated_at``), never moving one back: one statement text, run once a record
        (``executemany``), in the caller's transaction. (The ORM's ``CASE`` of one branch a
        record cost more to build than a batch's whole write.)

        ``lock_first``: on PostgreSQL, lock the rows in key order first, for a caller whose
        transaction has not locked them already (a batch that just wrote them has)."""
        if not moments:
            return
        connection = connections[app_database()]
        quote = connection.ops.quote_name

        def column(name: str) -> str:
            return quote(column_of(self.model, name))

        moment = column("search_updated_at")
        scope = "".join(f" AND {column(name)} = %s" for name in self.scope)
        sql = (
            f"UPDATE {quote(self.model._meta.db_table)} SET {moment} = %s "  # noqa: S608
            f"WHERE {column(self.key)} = %s{scope} AND ({moment} IS NULL OR {moment} < %s)"
        )
        adapt = connection.ops.adapt_datetimefield_value
        scoped = list(self.scope.values())
        rows = [(adapt(at), pk, *scoped, adapt(at)) for pk, at in moments.items()]
        with connection.cursor() as cursor:
            if lock_first and connection.vendor == "postgresql":
                # Locked first in key order, as page writes and lookup batches lock theirs
                # (upsert.read_by_ids): a cron sync settling beside a backfill's writes (or the
                # other way round) then never deadlocks.
                key = column(self.key)
                cursor.execute(
                    f"SELECT {key} FROM {quote(self.model._meta.db_table)} "  # noqa: S608
                    f"WHERE {key} = ANY(%s){scope} ORDER BY {key} FOR UPDATE",
                    [list(moments), *scoped],
                )
            cursor.executemany(sql, rows)

    def stamp(self, record_id: str, moment: datetime) -> Callable[[object], None]:
        """Inside a looked-up record's transaction: the projection it answered is settled
        (whatever the write stored)."""

        def stamp(result: object) -> None:
            self.rows().filter(self._newer(record_id, moment)).update(search_updated_at=moment)

        return stamp

    def count(self) -> int:
        """How many records of the resource the mirror holds."""
        return self.rows().count()


if TYPE_CHECKING:
    from ...exceptions.wire import InvalidRecord

#: What a resource name may be: it becomes part of the URL path (``/<resource>/page``), and it
#: is stored in columns of this length (``SyncRun``, ``SyncLease``, ``RemoteRecord``).
RESOURCE_NAME = re.compile(r"[a-z0-9_]{1,64}")


class Resource:
    """One upstream resource, as the walk, the change feed, the lookups and the mirror handle it.

    A subclass per kind of resource sets the class attributes and overrides the methods that
    differ: ``OrdersResource`` (orders, with their customers and refunds),
    ``RefundsResource``, ``RawResource`` (any resource kept as its records, customers among
    them). Every resource has ``parse`` (one record, as decoded), ``read_page`` (a walk's page
    of bytes: with ``parse``, record by record, or faster, orders by wire fingerprint first)
    and ``store`` (a page of parsed records, in the caller's transaction).

    The walk's shortcuts are methods that do nothing here: ``complete`` (records read in full
    before a page is written), ``quiet`` (a page that changes nothing counted without a
    transaction), ``is_open`` (a record the refresh looks up again; ``refreshed`` says whether
    the resource has a lifecycle). The lookups by id (``look_up``, ``store_lookup``,
    ``set_aside``; ``store_lookups`` for a batch) raise ``NotImplementedError`` here: a resource
    that has them overrides them and says so (``has_lookups``, ``batched_lookups``). Adding
    one: docs/architecture/sync.md, "Adding a typed resource".
    """

    #: Its name (``/<name>/page``), the page's collection property, the model it fills.
    name: str
    collection: str
    model: type[models.Model]
    #: What one record and several are called in messages.
    noun: tuple[str, str] = ("record", "records")
    #: Whether its walk ends with the refresh of the refunds still moving (pending,
    #: processing), which no webhook reports: orders carry refunds, and refunds are that.
    refresh_refunds: bool = False
    #: Whether its open records (``is_open``) are refreshed by lookup after a walk.
    refreshed: bool = False
    #: The search index's resource type (``order``, ``customer``) of ``/<name>/search``, and
    #: what the mirror keeps of it: with both and the lookups, ``sync_orders --backfill`` reads
    #: the resource's whole history (``sync.backfill``); ``None``: no search index.
    search_type: str | None = None
    searched: SearchedMirror | None = None
    #: Whether each sync also reads the change feed of its search index (``sync.feed``).
    change_feed: bool = False
    #: Whether the sync walks ``/<name>/page``; one that is not (the balance) is read by one
    #: call a run, which ``take`` stores.
    paged: bool = True
    #: Whether its walk ends with lookups of what its records name that the mirror lacks
    #: (payouts and balance transactions: ``sync.money``).
    looks_up_named: bool = False

    #: Whether it is looked up by id: ``look_up``, ``store_lookup`` and ``set_aside`` are
    #: its own (the base's raise ``NotImplementedError``).
    has_lookups: bool = False
    #: Whether its lookups are also stored a batch a transaction (``store_lookups``).
    batched_lookups: bool = False

    def look_up(
        self,
        ids: Iterable[str],
        *,
        concurrency: int | None = None,
        heartbeat: Callable[[], None] | None = None,
        gate: Any = None,
    ) -> Iterator[Any]:
        """Look up the records ``ids``, several in flight: each with ``record_id`` and
        ``record`` (``None`` for a record unknown to the service)."""
        raise NotImplementedError(f"the {self.name} resource has no lookups by id")

    def store_lookup(
        self, lookup: Any, *, within: Within | None = None, origin: Any = None
    ) -> MirrorResult | None:
        """Write one looked-up record in its own transaction (``within`` inside it); ``None``
        for a record unknown to the service, left as it is."""
        raise NotImplementedError(f"the {self.name} resource has no lookups by id")

    def store_lookups(
        self, lookups: Sequence[Any], *, within: Within | None = None, origin: Any = None
    ) -> MirrorResult:
        """Write several looked-up records in one transaction (``batched_lookups``)."""
        raise NotImplementedError(f"the {self.name} resource stores no lookups in batches")

    def set_aside(self, record_id: str, *, within: Within | None = None) -> None:
        """The transaction of a lookup that stores nothing (an unknown or refused record):
        only ``within``, and what the resource notes of it."""
        raise NotImplementedError(f"the {self.name} resource has no lookups by id")

    def parse(self, record: Any, *, plain: bool = False) -> Any:
        """One record as decoded; ``InvalidRecord`` naming what is wrong."""
        raise NotImplementedError

    def store(
        self,
        records: Sequence[Any],
        *,
        now: datetime,
        sent_at: datetime | None = None,
        known_customers: set[str] | None = None,
    ) -> MirrorResult:
        """Write a page of parsed records in the caller's transaction."""
        raise NotImplementedError

    def read_page(self, records: Sequence[Any], *, page_number: int) -> list[Any]:
        """A walk's page (each record as its bytes), its malformed records set aside: a
        ``parsing.LenientPage`` (``parsing.read_records`` reads one with ``parse``)."""
        raise NotImplementedError

    def complete(
        self, records: list[Any], *, encode: bool = False
    ) -> tuple[list[Any], list[tuple[str, InvalidRecord]]]:
        """``records`` read in full before their page is written, and the malformed ones with
        where they are; read in full already here."""
        return records, []

    def quiet(self, records: list[Any], known_customers: set[str]) -> MirrorResult | None:
        """The page counted without a transaction when it changes nothing; ``None``: write it."""
        return None

    def is_open(self, record: Any) -> bool:
        """Whether the record may still change (refreshed by lookup when the walk missed it)."""
        return False

    def take(self, answer: Any) -> MirrorResult:
        """Store the one answer of a resource that is not paged (``paged``)."""
        raise NotImplementedError

    def customers(self, records: Sequence[Any]) -> set[str]:
        """The ids of the customers a page's records embed (rolled back with the page)."""
        return set()

    @property
    def backfilled(self) -> bool:
        """Whether ``sync_orders --backfill`` can read its whole history through search."""
        return self.search_type is not None and self.searched is not None and self.has_lookups

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


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
