"""What the mirror keeps of a resource with a search index, for the change feed and the backfill.

Each searched resource (``Resource.searched``) says where its records are, the last search
``updated_at`` the mirror settled of each (``search_updated_at``: a newer projection means the
record changed upstream) and whether a stored record is as a projection shows it; how one is
looked up and written is the resource's (``Resource.look_up``). Orders are rows of ``Order``;
customers raw rows of ``RemoteRecord``. ``sync.feed_rules.decide`` reads only this and the registry,
never a model by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections, models
from django.db.models import Q

from ..client.search_structs import SearchResult
from ..db import app_database
from .upsert import column_of


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
